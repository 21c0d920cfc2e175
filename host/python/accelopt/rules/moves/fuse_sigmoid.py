"""Rule ``fuse_sigmoid``: reciprocal(1 + exp(-x)) -> ``nisa.activation(op=nl.sigmoid, data=x)``.

Matches the reciprocal forms of patterns.reciprocal_arg applied to
``1 + e`` (``tensor_scalar(data=e, op0=nl.add, operand0=1.0)``,
``nl.add(e, 1.0)``, ``e + 1``) with ``e = exp(-x)``
(``activation(op=nl.exp, data=x, scale=-1.0)`` or ``nl.exp(nl.negative(x))``);
each intermediate may be inline or a temp read only by the next step (its
definition is deleted). Preconditions: nothing between a deleted temp's
definition and the reciprocal rebinds or writes a name it reads; no
dtype/mask/bias anywhere in the chain. Cost (nki-facts §3.2/3.3): ScalarE
evaluates op(data * scale + bias) in one instruction, so 3 instructions
(one a VectorE reciprocal) become one ScalarE activation.
"""
import ast

from .. import analysis as A
from .. import patterns as P
from ..base import Candidate
from ..sigmoid_chain import sigmoid_of_reciprocal
from ..walk import walk

NAME = "fuse_sigmoid"
SUMMARY = "Replace reciprocal(1 + exp(-x)) by one ScalarE sigmoid activation."
EFFECT = "VectorE/ScalarE time: one activation replaces a 3-4 instruction chain (nki-facts §3.2, §3.3)"
GAIN = 0.5  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"vector": 1.0, "scalar": 1.0, "instructions": 1.0}  # resource -> weight (docs/rules.md)
ORDER = 4  # position among the built-in rules when proposals tie (docs/rules.md)


def candidates(src):
    """Every reciprocal whose argument is (temps holding) 1 + exp(-x)."""
    out = []
    for func in A.functions(src.tree):
        for node in walk(func):
            if A.enclosing(src, node, (ast.FunctionDef, ast.AsyncFunctionDef)) is not func:
                continue
            if P.reciprocal_arg(src, node) is None:
                continue
            stmt = A.statement_of(src, node)
            inl = P.Inlining(src, func, stmt)
            x = sigmoid_of_reciprocal(src, inl, node)
            if x is None or not inl.safe():
                continue
            text = f"{src.prefix('nisa')}.activation(op={src.prefix('nl')}.sigmoid, data={src.segment(x)})"
            site = P.label(src, stmt)
            out.append(Candidate(
                src, site, f"fuse 1/(1+exp(-{src.segment(x)})) into one sigmoid activation in '{site}'",
                (lambda n=node, t=text, i=inl: [src.replace_node(n, t)] + i.deletions()),
                {"target": site, "x": src.segment(x)}, ("vector", "scalar", "instructions"), 70.0))
    return out
