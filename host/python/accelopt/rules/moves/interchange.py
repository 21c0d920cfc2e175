"""Rule ``interchange``: swap two perfectly nested ``affine_range`` loops and hoist what the new inner
loop does not depend on.

Before (mamba: the channel-tile loads do not depend on the state)::

    for s in nl.affine_range(S):
        for c in nl.affine_range(C):
            c0 = c * 128
            d_t = nl.load(delta[c0:c0 + 128, 0:L])
            ...

After::

    for c in nl.affine_range(C):
        c0 = c * 128
        d_t = nl.load(delta[c0:c0 + 128, 0:L])
        for s in nl.affine_range(S):
            ...

Preconditions: the outer loop's body is exactly the inner loop; both are
``nl.affine_range`` with one argument (iterations independent, nki-facts
§2.4, so their order is free; accumulations such as ``acc[...] += t`` are
reassociated, exact up to fp32 rounding); the inner trip count does not read
the outer variable; after the swap at least one ``nl.load`` of the body is
invariant in the new inner loop (``invariant.invariant_statements``), and those
statements move in front of it. Cost: the hoisted loads and computations run
once per outer iteration instead of once per (outer, inner) pair: fewer DMAs
and HBM bytes (nki-facts §3.4) and fewer engine instructions.
"""
import ast

from .. import analysis as A
from .. import invariant as I
from ..base import Candidate
from ..source import Edit
from ..walk import walk


NAME = "interchange"
SUMMARY = "Swap two nested affine loops so the loads that do not depend on the new inner loop move out of it."
EFFECT = ("DMA count and HBM bytes: loads of the new outer loop's data are reused across the inner loop "
          "(nki-facts §2.4, §3.4)")
GAIN = 0.5  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"dma": 1.0, "vector": 0.4, "instructions": 0.5}  # resource -> weight (docs/rules.md)
ORDER = 12  # position among the built-in rules when proposals tie (docs/rules.md)


def _affine1(src, loop):
    return A.is_range_loop(src, loop, ("nl.affine_range",)) and isinstance(loop.target, ast.Name) \
        and len(loop.iter.args) == 1 and not loop.iter.keywords


def candidates(src):
    """One candidate per qualifying loop nest."""
    out = []
    for func in A.functions(src.tree):
        for outer in walk(func):
            if not isinstance(outer, ast.For) or len(outer.body) != 1 or not isinstance(outer.body[0], ast.For):
                continue
            inner = outer.body[0]
            if not (_affine1(src, outer) and _affine1(src, inner)) or not src.owns_lines(outer) \
                    or not src.owns_lines(inner):
                continue
            if outer.target.id in A.read_names(inner.iter):
                continue
            stmts = _hoisted_after_swap(src, func, outer, inner)
            if stmts is None:
                continue
            out.append(_cand(src, outer, inner, stmts))
    return out


def _hoisted_after_swap(src, func, outer, inner):
    """Statements of the body invariant in the outer variable, if one is a load and one stays."""
    swapped = ast.For(target=outer.target, iter=outer.iter, body=inner.body, orelse=[])
    ast.copy_location(swapped, inner)  # a detached view: the body's nodes keep their real parents
    stmts = I.invariant_statements(src, func, swapped)
    if not stmts or not I.has_load(src, stmts) or len(stmts) == len(inner.body):
        return None
    return stmts


def _cand(src, outer, inner, stmts):
    a, b = outer.target.id, inner.target.id
    names = [s.targets[0].id for s in stmts]

    def edits():
        seg = src.segment
        out = [src.replace_node(outer.target, b), src.replace_node(outer.iter, seg(inner.iter)),
               src.replace_node(inner.target, a), src.replace_node(inner.iter, seg(outer.iter))]
        at, _ = src.line_span(src.comment_start(inner), inner.lineno)
        out.append(Edit(at, at, I.moved_text(src, stmts, src.indent_of(inner))))
        out += [src.delete_stmt(s, inner.body) for s in stmts]
        return out

    return Candidate(src, f"{a}<->{b}", f"swap the loops over '{a}' and '{b}' and load {', '.join(names)} once "
                     f"per '{b}' iteration", edits, {"outer": a, "inner": b, "hoisted": names},
                     {"dma": 1.0, "vector": 0.4, "instructions": 0.5}, 66.0)
