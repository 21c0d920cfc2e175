"""Rule ``scale_to_activation``: a tile-by-scalar multiply -> one ScalarE ``activation`` with ``scale=``.

``nisa.tensor_scalar(data=x, op0=nl.multiply, operand0=s)`` (engine left to the
compiler) or ``nl.multiply(x, c)`` with a provable scalar ``c`` or a provable column
tile ``c`` (a (P, 1) row statistic: ``nl.sum/max/min/mean(..., axis=[1])``,
``nisa.tensor_reduce(..., axis=[1])`` and elementwise math of such a column
with scalars, e.g. ``nl.rsqrt(nl.sum(sq, axis=[1]) / K)``) becomes
``nisa.activation(op=nl.copy, data=x, scale=s)``: ScalarE evaluates
op(data * scale + bias) in one instruction whatever the function, and
``scale`` may be a scalar or a (P, 1) tile (nki-facts §2.6, §3.2). It takes
the work off VectorE, whose in-order stream often also carries reductions
and tensor_tensor ops (nki-facts §3.2, §3.3: max(MIN_II, N) cycles on either
engine, ScalarE at 1.4 GHz against VectorE's 1.12).

Preconditions: tensor_scalar with exactly data, op0=nl.multiply, operand0,
optionally a mask (kept: activation takes one) and trivial keywords
(dtype=float32, engine=unknown; reverse0 is irrelevant for a product);
or nl.multiply of a provable tile and a provable scalar (either order),
without dtype/mask; the kernel uses no integer dtypes.
"""
import ast

from .. import analysis as A
from .. import patterns as P
from ..base import Candidate
from ..columns import column_names
from ..imports import isa_prefix
from ..walk import walk

NAME = "scale_to_activation"
SUMMARY = "Compute x * s on ScalarE as activation(op=nl.copy, scale=s) instead of a VectorE/auto multiply."
EFFECT = "engine balance: the multiply moves to ScalarE's scale= (free in an activation, nki-facts §3.2)"
GAIN = 0.15  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"vector": 1.0}  # resource -> weight (docs/rules.md)
ORDER = 14  # position among the built-in rules when proposals tie (docs/rules.md)


def candidates(src):
    """Every qualifying multiply (see the module docstring)."""
    if P.integer_dtypes(src):
        return []
    out = []
    for func in A.functions(src.tree):
        scalars = A.Scalars(src, func)
        tiles = P.tile_names(src, func)
        cols = column_names(src, func, scalars)
        for node in walk(func):
            if A.enclosing(src, node, (ast.FunctionDef, ast.AsyncFunctionDef)) is not func:
                continue
            m = _match(src, node, scalars, tiles, cols)
            if m is None:
                continue
            data, scale, mask = m
            stmt = A.statement_of(src, node)
            site = P.label(src, stmt)
            out.append(_cand(src, node, data, scale, mask, site))
    return out


def _match(src, node, scalars, tiles, cols=frozenset()):
    qual = src.call_name(node)
    if qual == "nisa.tensor_scalar":
        args = P.clean(src, A.call_args(node, qual))
        if args is not None and P.is_op(src, args.get("op0"), "multiply"):
            args.pop("reverse0", None)  # x * s == s * x
            if P.only_keys(args, {"data", "op0", "operand0", "mask"}) and {"data", "operand0"} <= set(args):
                return args["data"], args["operand0"], args.get("mask")
        return None
    if qual == "nl.multiply":
        args = P.clean(src, A.call_args(node, qual))
        if not (P.only_keys(args, {"x", "y"}) and len(args) == 2):
            return None
        for a, b in ((args["x"], args["y"]), (args["y"], args["x"])):
            if (scalars.is_scalar(b) or (isinstance(b, ast.Name) and b.id in cols)) and P.is_tile(src, a, tiles) \
                    and not (isinstance(a, ast.Name) and a.id in cols):
                return a, b, None
    return None


def _cand(src, node, data, scale, mask, site):
    def edits():
        isa, extra = isa_prefix(src)
        keep = f", mask={src.segment(mask)}" if mask is not None else ""
        text = f"{isa}.activation(op={src.prefix('nl')}.copy, data={src.segment(data)}, " \
               f"scale={src.segment(scale)}{keep})"
        return [src.replace_node(node, text)] + extra

    return Candidate(src, site, f"compute the multiply in '{site}' on ScalarE (activation scale=)", edits,
                     {"target": site}, {"vector": 1.0}, 44.0)
