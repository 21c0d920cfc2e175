"""Rule ``affine_loop``: a loop without loop-carried dependencies becomes ``nl.affine_range``.

A Python ``range`` loop and ``nl.sequential_range`` are sequential loops
(nki-facts §2.4): the compiler must keep their iterations in order, so the
next iteration's loads cannot be issued while this one computes.
``nl.affine_range`` declares the iterations independent, which lets the
compiler pipeline them - the next tile's DMA overlaps this tile's compute and
tiles allocated in the body get several buffers (nki-facts §2.4, §3.6)::

    for off in range(0, S, TILE):                ->   for off_i in nl.affine_range((S + TILE - 1) // TILE):
        t = nl.load(x[i_p, i_f + off])                    off = off_i * TILE
        ...                                               t = nl.load(x[i_p, i_f + off])

``range(n)`` and ``nl.sequential_range(n)`` keep their argument.

Preconditions (no loop-carried dependency, proven on the AST): no ``break``,
``continue``, ``return``, ``else`` or nested function; every name bound in
the body is bound there before any read of it in source order (its first
mention is a binding) and is not read after the loop; the body writes no
tensor it did not allocate itself, except HBM tensors through ``nl.store``
that the loop never reads (the outputs), and nothing else writes into those
in the loop; a ``range`` step is a positive integer (a literal or a name
bound once to one); the generated loop variable name is free. An iteration
that still stored to another iteration's location would be
``err_unexpected_output_dependencies`` in the profile stage (nki-facts §2.4).
"""
import ast

from .. import analysis as A
from ..base import Candidate
from ..source import Edit
from ..walk import walk

NAME = "affine_loop"
SUMMARY = "Declare a loop without loop-carried dependencies as nl.affine_range so its iterations pipeline."
EFFECT = ("overlap: independent iterations may be pipelined, the next tile's DMA runs under this tile's "
          "compute with several buffers per tile (nki-facts §2.4, §3.6)")
GAIN = 0.3  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"dma": 0.6, "vector": 0.3, "scalar": 0.3}  # resource -> weight (docs/rules.md)
ORDER = 19  # position among the built-in rules when proposals tie (docs/rules.md)


def candidates(src):
    """One candidate per qualifying ``range`` / ``nl.sequential_range`` loop."""
    out = []
    for func in A.functions(src.tree):
        defs = A.bindings(func)
        for loop in walk(func):
            if isinstance(loop, ast.For) and A.enclosing(src, loop, (ast.FunctionDef, ast.AsyncFunctionDef)) is func:
                c = _site(src, func, defs, loop)
                if c is not None:
                    out.append(c)
    return out


def _positive_int(defs, node):
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool) and node.value > 0
    if isinstance(node, ast.Name):
        values = defs.get(node.id, [])
        return len(values) == 1 and values[0] is not None and _positive_int({}, values[0])
    return False


def _site(src, func, defs, loop):
    if loop.orelse or not isinstance(loop.target, ast.Name) or not isinstance(loop.iter, ast.Call):
        return None
    it = loop.iter
    qual = src.call_name(it)
    builtin = isinstance(it.func, ast.Name) and it.func.id == "range" and "range" not in defs
    if not (builtin or qual == "nl.sequential_range") or it.keywords or not 1 <= len(it.args) <= (3 if builtin else 1):
        return None
    if len(it.args) == 3 and not _positive_int(defs, it.args[2]):
        return None
    if any(isinstance(n, (ast.Break, ast.Continue, ast.Return, ast.FunctionDef, ast.Lambda, ast.Yield))
           for s in loop.body for n in walk(s)):
        return None
    var = loop.target.id
    bound = set()
    for s in loop.body:
        for n in walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                bound.add(n.id)
    if var in bound:
        return None
    # every name bound in the body: first mention (source order) is its binding
    mentions = sorted(((n.lineno, n.col_offset, n) for s in loop.body for n in walk(s)
                       if isinstance(n, ast.Name) and n.id in bound), key=lambda t: (t[0], t[1]))
    first = {}
    for _, _, n in mentions:
        first.setdefault(n.id, n)
    for name, n in first.items():
        if not isinstance(n.ctx, ast.Store) or _stored_after_read(src, n):
            return None
    after = [n for n in walk(func) if isinstance(n, ast.Name) and n.id in bound and isinstance(n.ctx, ast.Load)
             and (n.lineno, n.col_offset) > (loop.end_lineno, loop.end_col_offset)]
    if after:
        return None
    # memory written in the body: only its own tensors, or outputs through nl.store never read in the loop
    written = set()
    for s in loop.body:
        written |= A.written_roots(src, s)
    outside = written - bound
    if outside:
        stores = _store_roots(src, loop)
        reads = {n.id for s in loop.body for n in walk(s) if isinstance(n, ast.Name)
                 and isinstance(n.ctx, ast.Load) and not _is_store_dst(src, n)}
        if not outside <= stores or outside & reads or not all(_hbm(src, defs, func, r) for r in outside):
            return None
        if any(_subscript_write_of(src, s, outside) for s in loop.body):
            return None
    fresh = f"{var}_i"
    if any(isinstance(n, ast.Name) and n.id == fresh for n in walk(src.tree)):
        return None

    def edits():
        nl = src.prefix("nl")
        args = [src.segment(a) for a in it.args]
        if qual == "nl.sequential_range" or len(args) == 1:
            return [src.replace_node(it, f"{nl}.affine_range({', '.join(args)})")]
        start, stop = args[0], args[1]
        step = args[2] if len(args) == 3 else "1"
        span = stop if start == "0" else f"{stop} - {start}"
        count = f"({span} + {step} - 1) // {step}" if step != "1" else span
        value = f"{fresh} * {step}" if step != "1" else fresh
        value = value if start in ("0",) else f"{start} + {value}"
        indent = src.indent_of(loop.body[0])
        lo, _ = src.line_span(src.comment_start(loop.body[0]), loop.body[0].lineno)
        return [src.replace_node(loop.target, fresh), src.replace_node(it, f"{nl}.affine_range({count})"),
                Edit(lo, lo, f"{indent}{var} = {value}\n")]

    kind = "range" if builtin else "sequential_range"
    return Candidate(src, var, f"declare the {kind} loop over '{var}' as nl.affine_range (no loop-carried "
                     f"dependency: its iterations may overlap)", edits, {"loop": var}, {"dma": 0.6, "vector": 0.3,
                                                                                        "scalar": 0.3}, 54.0)


def _stored_after_read(src, node):
    """True if the binding ``node`` sits in an assignment whose value reads the same name (``x = x + 1``)."""
    stmt = A.statement_of(src, node)
    value = getattr(stmt, "value", None)
    return value is not None and any(isinstance(n, ast.Name) and n.id == node.id and isinstance(n.ctx, ast.Load)
                                     for n in walk(value))


def _store_roots(src, loop):
    out = set()
    for n in walk(loop):
        if isinstance(n, ast.Call) and src.call_name(n) == "nl.store":
            args = A.call_args(n, "nl.store") or {}
            if args.get("dst") is not None and A.root_name(args["dst"]):
                out.add(A.root_name(args["dst"]))
    return out


def _is_store_dst(src, name_node):
    p = src.parents.get(name_node)
    while p is not None and not isinstance(p, ast.Call):
        p = src.parents.get(p)
    if p is None or src.call_name(p) != "nl.store":
        return False
    args = A.call_args(p, "nl.store") or {}
    dst = args.get("dst")
    return dst is not None and any(n is name_node for n in walk(dst))


def _subscript_write_of(src, stmt, roots):
    for n in walk(stmt):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AugAssign) else []
        for t in targets:
            if isinstance(t, (ast.Subscript, ast.Attribute)) and A.root_name(t) in roots:
                return True
    return False


def _hbm(src, defs, func, name):
    values = defs.get(name, [])
    if len(values) != 1 or values[0] is None or src.call_name(values[0]) != "nl.ndarray":
        return False
    return any(k.arg == "buffer" and src.qualname(k.value) in ("nl.shared_hbm", "nl.hbm", "nl.private_hbm")
               for k in values[0].keywords)
