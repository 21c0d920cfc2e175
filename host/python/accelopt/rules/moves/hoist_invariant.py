"""Rule ``hoist_invariant``: move every loop-invariant statement of a loop body in front of the loop.

The statements (loads, elementwise compute such as ``broadcast_to`` or a
product of two invariant tiles, scalar index arithmetic) are those of
``invariant.invariant_statements``; they move together, in order, with their
comments. Proposed when at least one of them computes (a lone invariant
load is ``hoist_load``'s move). Cost: the moved instructions run once
instead of once per iteration (fewer engine instructions; for loads fewer
DMAs, nki-facts §3.4). One loop level per application.
"""
import ast

from .. import analysis as A
from .. import invariant as I
from ..base import Candidate
from ..source import Edit
from ..walk import walk

NAME = "hoist_invariant"
SUMMARY = "Move the loop-invariant loads and computations of a loop body in front of the loop."
EFFECT = "engine instructions and DMAs: loop-invariant work runs once (nki-facts §3.2, §3.4)"
GAIN = 0.2  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"instructions": 1.0, "vector": 0.5, "tensor": 0.3, "dma": 0.5}  # resource -> weight (docs/rules.md)
ORDER = 11  # position among the built-in rules when proposals tie (docs/rules.md)


def candidates(src):
    """One candidate per loop with invariant compute statements (and something left in the body)."""
    out = []
    for func in A.functions(src.tree):
        for loop in walk(func):
            if not isinstance(loop, ast.For) or not src.owns_lines(loop):
                continue
            stmts = I.invariant_statements(src, func, loop)
            if not stmts or len(stmts) == len(loop.body) or not I.has_compute(src, stmts):
                continue
            out.append(_cand(src, loop, stmts))
    return out


def _cand(src, loop, stmts):
    var = src.segment(loop.target)
    names = [s.targets[0].id for s in stmts]

    def edits():
        at, _ = src.line_span(src.comment_start(loop), loop.lineno)
        return [Edit(at, at, I.moved_text(src, stmts, src.indent_of(loop)))] + I.deletions(src, loop, stmts)

    return Candidate(src, f"{','.join(names)}@{var}", f"hoist {', '.join(names)} out of the loop over '{var}' "
                     f"(they do not depend on it)", edits, {"loop": var, "names": names},
                     {"instructions": 1.0, "vector": 0.5, "tensor": 0.3, "dma": 0.5}, 60.0)
