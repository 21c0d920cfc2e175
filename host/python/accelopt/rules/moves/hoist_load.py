"""Rule ``hoist_load``: move a loop-invariant ``v = nl.load(...)`` in front of its loop.

Preconditions (all checked on the AST):

* the statement is ``v = nl.load(<src>, ...)`` directly in the body of a
  ``for`` over ``nl.affine_range``/``sequential_range``/``static_range``/``range``;
* no name the call reads is bound anywhere in the loop (the loop variable
  included), so the source index is invariant;
* the loaded tensor (root name of ``<src>``) is not written in the loop:
  no ``nl.store`` into it, no subscript/augmented assignment, not passed
  to a non-NKI function (which might store into it);
* ``v`` is bound only by this statement inside the loop, never written in
  place (``v[...] =``, ``v +=``, helper calls), not read in the loop before
  the load, and not mentioned anywhere in the function outside the loop.

The hoisted load runs once even when the loop runs zero times; an
out-of-bounds index then fails loudly in the profile stage. Cost: one DMA
instead of one per iteration (nki-facts §3.4: the compiler's own hoisting is
undocumented and re-issues loads whose buffers do not fit).
"""
import ast

from .. import analysis as A
from ..base import Candidate
from ..source import Edit
from ..walk import walk

NAME = "hoist_load"
SUMMARY = "Hoist a loop-invariant nl.load out of its loop."
EFFECT = "DMA count and HBM bytes: one load instead of one per iteration (nki-facts §3.4)"
GAIN = 0.3  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"dma": 1.0}  # resource -> weight (docs/rules.md)
ORDER = 1  # position among the built-in rules when proposals tie (docs/rules.md)


def candidates(src):
    """Every hoistable load statement (hoisted one loop level per application)."""
    out = []
    for loop in walk(src.tree):
        if not A.is_range_loop(src, loop):
            continue
        func = A.enclosing(src, loop, (ast.FunctionDef, ast.AsyncFunctionDef))
        if func is None or not src.owns_lines(loop):
            continue
        bound = {n.id for n in A.name_stores(loop)}
        written = A.written_roots(src, loop)
        for i, stmt in enumerate(loop.body):
            c = _candidate(src, func, loop, i, stmt, bound, written)
            if c is not None:
                out.append(c)
    return out


def _candidate(src, func, loop, i, stmt, bound, written):
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    call = stmt.value
    if src.call_name(call) != "nl.load":
        return None
    args = A.call_args(call, "nl.load")
    if args is None or "src" not in args:
        return None
    v = stmt.targets[0].id
    reads = A.read_names(call)
    root = A.root_name(args["src"])
    if root is None or reads & bound or root in written or v in written:
        return None
    if len(A.name_stores(loop, v)) != 1 or not src.owns_lines(stmt):
        return None
    if any(A.name_loads(s, v) for s in loop.body[:i]) or A.name_loads(loop.iter, v):
        return None
    inside = {id(n) for n in walk(loop)}
    if any(isinstance(n, ast.Name) and n.id == v and id(n) not in inside for n in walk(func)):
        return None
    loop_var = src.segment(loop.target).replace(" ", "")
    site = f"{v}@{loop_var}"

    def edits():
        indent = src.indent_of(loop)
        at, _ = src.line_span(src.comment_start(loop), loop.lineno)  # above the loop's own comments
        return [src.delete_stmt(stmt, loop.body), Edit(at, at, src.stmt_text(stmt, indent))]

    return Candidate(src, site, f"hoist the load of '{v}' out of the loop over '{loop_var}' "
                     f"(its source does not depend on the loop)", edits,
                     {"var": v, "loop": loop_var, "tensor": root}, ("dma",), 50.0)
