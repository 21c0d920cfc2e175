"""Loop-invariant statements of a loop body (shared by ``hoist_invariant`` and ``interchange``).

A statement of the body of ``for v in <range>(...)`` is *invariant* when it is
``name = <expr>`` (a plain name target) and

* ``<expr>`` is an NKI call that returns a new tile (``nl.load``, elementwise
  ``nl``/``nisa`` compute, ``broadcast_to`` of a tile) or a scalar expression;
  never ``nl.store``, an allocation, a call with ``reduce_res=`` or a non-NKI
  function;
* it reads neither the loop variable nor any name bound by a non-invariant
  statement of the loop (anything bound in the loop outside the invariant
  set), nor a tensor written anywhere in the loop;
* ``name`` is bound only by this statement inside the loop, is never written in
  place there (``name[...] = ``, ``+=``, ``reduce_res=``), is not read in the
  loop before it, and is not read in the function outside the loop (except in
  another loop that binds it afresh first).

Evaluating such statements once, in order, in front of the loop gives every
iteration the same values (affine and sequential loops alike), since nothing
they read changes inside the loop.
"""
import ast

from . import analysis as A
from .walk import walk

_NEVER = {"nl.store", "nl.ndarray", "nl.zeros", "nl.ones", "nl.full", "nl.zeros_like", "nl.ones_like",
          "nl.empty_like", "nl.full_like", "nl.shared_constant", "nl.affine_range", "nl.sequential_range",
          "nl.static_range", "nl.device_print", "nl.program_id", "nisa.memset", "nisa.iota", "nl.loop_reduce"}


def _call_ok(src, value):
    """True if ``value`` is call-free or built from tile-producing NKI calls without side effects."""
    calls = [n for n in walk(value) if isinstance(n, ast.Call)]
    if not calls:
        return True  # index arithmetic, a view: evaluated at trace time, no side effects
    for c in calls:
        qual = src.call_name(c)
        if qual is None:
            if isinstance(c.func, ast.Attribute) and c.func.attr == "broadcast_to":
                continue
            if src.call_name(c.func) is None and isinstance(c.func, ast.Attribute) \
                    and A.root_name(c.func) in A.PURE_MODULES:
                continue  # np.float32(...) and friends
            return False
        if qual in _NEVER or any(k.arg in A.WRITE_KWARGS for k in c.keywords):
            return False
    return True


def invariant_statements(src, func, loop):
    """The invariant statements of ``loop.body`` (module docstring), in source order."""
    if not A.is_range_loop(src, loop) or not isinstance(loop.target, ast.Name):
        return []
    written = A.written_roots(src, loop)
    inside = {id(n) for n in walk(loop)}
    bound_in_loop = {n.id for n in A.name_stores(loop)}
    # Only names the loop binds can be moved, so only their reads outside it matter
    # (rebound_first walks the enclosing loops: asked for every name, it dominated
    # the host's move proposals on the large published kernels).
    outside_mentions = {n.id for n in walk(func) if isinstance(n, ast.Name) and n.id in bound_in_loop
                        and id(n) not in inside and isinstance(n.ctx, ast.Load)
                        and not rebound_first(src, n, loop)}
    variant = {loop.target.id}
    chosen, chosen_names = [], set()
    for i, stmt in enumerate(loop.body):
        names_here = {n.id for n in A.name_stores(stmt)}
        ok = (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
              and src.owns_lines(stmt))
        if ok:
            name = stmt.targets[0].id
            reads = A.read_names(stmt.value)
            ok = (not (reads & variant) and not (reads & (bound_in_loop - chosen_names))
                  and not (reads & written) and name not in written and name not in outside_mentions
                  and len(A.name_stores(loop, name)) == 1
                  and not any(A.name_loads(s, name) for s in loop.body[:i])
                  and _call_ok(src, stmt.value))
        if ok:
            chosen.append(stmt)
            chosen_names.add(stmt.targets[0].id)
        else:
            variant |= names_here
    return chosen


def moved_text(src, stmts, indent):
    """The statements' source (each with its comment block) re-indented to ``indent``."""
    return "".join(src.stmt_text(s, indent) for s in stmts)


def deletions(src, loop, stmts):
    """Edits deleting ``stmts`` from ``loop.body`` (at least one statement must remain)."""
    return [src.delete_stmt(s, loop.body) for s in stmts]


def has_compute(src, stmts):
    """True if any statement computes (an NKI call other than nl.load)."""
    return any((src.call_name(n) not in (None, "nl.load")
                or (isinstance(n.func, ast.Attribute) and n.func.attr == "broadcast_to"))
               for s in stmts for n in walk(s.value) if isinstance(n, ast.Call))


def has_load(src, stmts):
    """True if any statement is an nl.load."""
    return any(src.call_name(s.value) == "nl.load" for s in stmts)


def rebound_first(src, name_node, loop):
    """True if ``name_node`` sits in another for loop whose body assigns the name (a plain
    ``name = ...``) in a statement before any statement that mentions it otherwise."""
    other = A.enclosing(src, name_node, (ast.For,))
    while other is not None and other is not loop:
        if any(n is loop for n in walk(other)):
            return False  # an enclosing loop of ours: the name could be read after our loop
        for stmt in other.body:
            mentions = [n for n in walk(stmt) if isinstance(n, ast.Name) and n.id == name_node.id]
            if not mentions:
                continue
            return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == name_node.id \
                and not A.name_loads(stmt.value, name_node.id)
        other = A.enclosing(src, other, (ast.For,))
    return False

