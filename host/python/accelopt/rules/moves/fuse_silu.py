"""Rule ``fuse_silu``: x * sigmoid(x) or x / (1 + exp(-x)) -> ``nisa.activation(op=nl.silu, data=x)``.

Matches ``nl.multiply(x, s)`` / ``x * s`` (either order) with ``s`` =
``activation(op=nl.sigmoid, data=x)`` or reciprocal(1 + exp(-x)), and
``nl.divide(x, d)`` / ``x / d`` with ``d`` = 1 + exp(-x); intermediates
inline or temps read only by the next step (deleted). Preconditions: both
occurrences of x are the same expression without calls (a name or a
subscript), no dtype/mask, and nothing between a deleted temp and the
consumer rebinds or writes a name it reads. Cost: the whole chain becomes
one ScalarE activation (nki-facts §3.2: one activation costs the same whatever
its function).
"""
import ast

from .. import analysis as A
from .. import patterns as P
from ..base import Candidate
from ..sigmoid_chain import exp_chain, sigmoid_arg
from ..walk import walk

NAME = "fuse_silu"
SUMMARY = "Replace x * sigmoid(x) (in any of its spelled-out forms) by one ScalarE silu activation."
EFFECT = "VectorE/ScalarE time: one activation replaces a 4-5 instruction chain (nki-facts §3.2, §3.3)"
GAIN = 0.8  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"vector": 1.0, "scalar": 1.0, "instructions": 1.0}  # resource -> weight (docs/rules.md)
ORDER = 5  # position among the built-in rules when proposals tie (docs/rules.md)


def _divide_operands(src, node):
    if src.call_name(node) == "nl.divide":
        args = A.call_args(node, "nl.divide")
        if P.only_keys(args, {"x", "y"}) and len(args) == 2:
            return args["x"], args["y"]
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return node.left, node.right
    return None


def _match(src, func, node):
    stmt = A.statement_of(src, node)
    ops = P.multiply_operands(src, node)
    if ops is not None:
        for x, s in (ops, ops[::-1]):
            inl = P.Inlining(src, func, stmt)
            x2 = sigmoid_arg(src, inl, s)
            if x2 is not None and P.pure(x, src) and P.same_expr(x, x2) and inl.safe():
                return x, inl, stmt
        return None
    ops = _divide_operands(src, node)
    if ops is not None:
        x, d = ops
        inl = P.Inlining(src, func, stmt)
        x2 = exp_chain(src, inl, inl.look(d))
        if x2 is not None and P.pure(x, src) and P.same_expr(x, x2) and inl.safe():
            return x, inl, stmt
    return None


def candidates(src):
    """Every multiply/divide that spells out silu(x)."""
    out = []
    for func in A.functions(src.tree):
        for node in walk(func):
            if A.enclosing(src, node, (ast.FunctionDef, ast.AsyncFunctionDef)) is not func:
                continue
            m = _match(src, func, node)
            if m is None:
                continue
            x, inl, stmt = m
            text = f"{src.prefix('nisa')}.activation(op={src.prefix('nl')}.silu, data={src.segment(x)})"
            site = P.label(src, stmt)
            out.append(Candidate(
                src, site, f"fuse {src.segment(x)} * sigmoid({src.segment(x)}) into one silu activation "
                f"in '{site}'", (lambda n=node, t=text, i=inl: [src.replace_node(n, t)] + i.deletions()),
                {"target": site, "x": src.segment(x)}, ("vector", "scalar", "instructions"), 75.0))
    return out
