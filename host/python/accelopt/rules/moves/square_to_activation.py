"""Rule ``square_to_activation``: ``nl.multiply(a, a)`` / ``a * a`` -> ``nisa.activation(op=nl.square, data=a)``.

Preconditions: both operands are the same call-free expression and provably
a tile (bound only to NKI call results, patterns.tile_names), no dtype/mask.
Cost (nki-facts §3.3/3.5): a VectorE tensor_tensor of two SBUF fp32 inputs costs
2N cycles at 1.12 GHz; the ScalarE activation costs N at 1.4 GHz, and it
moves the work to the other engine (useful when VectorE is the bottleneck).
"""
import ast

from .. import analysis as A
from .. import patterns as P
from ..base import Candidate
from ..walk import walk

NAME = "square_to_activation"
SUMMARY = "Compute a*a as a ScalarE square activation instead of a VectorE multiply."
EFFECT = "engine balance: a VectorE tensor_tensor (2N) becomes a ScalarE activation (N) (nki-facts §3.3)"
GAIN = 0.2  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"vector": 1.0}  # resource -> weight (docs/rules.md)
ORDER = 7  # position among the built-in rules when proposals tie (docs/rules.md)


def candidates(src):
    """Every self-multiply of a provable tile."""
    out = []
    for func in A.functions(src.tree):
        tiles = P.tile_names(src, func)
        for node in walk(func):
            if A.enclosing(src, node, (ast.FunctionDef, ast.AsyncFunctionDef)) is not func:
                continue
            ops = P.multiply_operands(src, node)
            if ops is None or not P.same_expr(*ops) or not P.pure(ops[0], src) or not P.is_tile(src, ops[0], tiles):
                continue
            stmt = A.statement_of(src, node)
            a = src.segment(ops[0])
            text = f"{src.prefix('nisa')}.activation(op={src.prefix('nl')}.square, data={a})"
            site = P.label(src, stmt)
            out.append(Candidate(src, site, f"compute {a}*{a} in '{site}' as a ScalarE square activation",
                                 (lambda n=node, t=text: [src.replace_node(n, t)]),
                                 {"target": site}, ("vector",), 50.0))
    return out
