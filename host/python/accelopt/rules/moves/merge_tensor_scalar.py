"""Rule ``merge_tensor_scalar``: two chained tile-by-scalar ops -> one two-op ``nisa.tensor_scalar``.

A *scalar op* is either a one-op ``nisa.tensor_scalar(data=t, op0=A,
operand0=a[, reverse0=r])`` or an ``nl.add/subtract/multiply`` (or ``+ - *``)
of a tile and a provable scalar (``nl.subtract(c, t)`` / ``c - t`` is the
reversed form). When the data of an outer scalar op is (a temp holding) an
inner scalar op, both become::

    nisa.tensor_scalar(data=x, op0=A, operand0=a, reverse0=r, op1=B, operand1=b, reverse1=s)

(nki-facts §2.6: out = (x op0 a) op1 b). Preconditions: the inner op has no
dtype/mask/engine; the outer has no op1 and no engine (its dtype/mask are
kept); tiles are provable (bound only to NKI call results) and scalars
provable (literals, module constants, ``.shape`` entries, loop indices and
arithmetic of them; function parameters are refused); operands of a
tensor_scalar may also be (P, 1) tiles; both ops arithmetic or both bitvec;
the kernel uses no integer dtypes (nl.* promotes int tiles by float
scalars, tensor_scalar keeps the tile dtype); the intermediate is inline or
a temp read only there and nothing in between rebinds or writes a name the
inner op reads. Cost (nki-facts §3.3): a two-op tensor_scalar costs the same as a
one-op one, so one instruction and one intermediate tile disappear.
"""
import ast

from .. import analysis as A
from .. import patterns as P
from ..base import Candidate
from ..walk import walk

NAME = "merge_tensor_scalar"
SUMMARY = "Merge two chained tile-by-scalar ops (tensor_scalar or nl.add/subtract/multiply) into one."
EFFECT = "instruction count: a two-op tensor_scalar costs one instruction (nki-facts §3.3)"
GAIN = 0.15  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"instructions": 1.0, "vector": 0.5, "scalar": 0.5}  # resource -> weight (docs/rules.md)
ORDER = 8  # position among the built-in rules when proposals tie (docs/rules.md)

_BITVEC = {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"}
_BINOPS = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply"}


class _Op:
    """One scalar op: data node, op text, operand node, reverse flag text or None, extra kwargs."""

    def __init__(self, data, op, kind, operand, reverse, extra):
        self.data, self.op, self.kind, self.operand, self.reverse, self.extra = \
            data, op, kind, operand, reverse, extra


def _scalar_op(src, node, scalars, tiles, outer):
    """_Op for ``node`` or None (see the module docstring for the accepted forms)."""
    if src.call_name(node) == "nisa.tensor_scalar":
        args = A.call_args(node, "nisa.tensor_scalar")
        allowed = {"data", "op0", "operand0", "reverse0"} | ({"dtype", "mask"} if outer else set())
        if not P.only_keys(args, allowed) or not {"data", "op0", "operand0"} <= set(args):
            return None
        q = src.qualname(args["op0"]) if isinstance(args["op0"], (ast.Attribute, ast.Name)) else None
        if q is None or not q.startswith("nl."):
            return None
        kind = "bitvec" if q[3:] in _BITVEC else "arith"
        rev = src.segment(args["reverse0"]) if "reverse0" in args else None
        extra = {k: v for k, v in args.items() if k in ("dtype", "mask")}
        return _Op(args["data"], src.segment(args["op0"]), kind, args["operand0"], rev, extra)
    op = None
    qual = src.call_name(node)
    for name in ("add", "subtract", "multiply"):
        if qual == "nl." + name:
            args = A.call_args(node, qual)
            if not P.only_keys(args, {"x", "y"}) or len(args) != 2:
                return None
            op, x, y = name, args["x"], args["y"]
    if op is None and isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        op, x, y = _BINOPS[type(node.op)], node.left, node.right
    if op is None:
        return None
    nl = src.prefix("nl")
    if scalars.is_scalar(y) and (outer or P.is_tile(src, x, tiles)):
        return _Op(x, f"{nl}.{op}", "arith", y, None, {})
    if scalars.is_scalar(x) and (outer or P.is_tile(src, y, tiles)):
        return _Op(y, f"{nl}.{op}", "arith", x, "True" if op == "subtract" else None, {})
    return None


def candidates(src):
    """Every outer scalar op whose data is (a temp holding) an inner scalar op."""
    if P.integer_dtypes(src):
        return []
    out = []
    for func in A.functions(src.tree):
        scalars = A.Scalars(src, func)
        tiles = P.tile_names(src, func)
        for node in walk(func):
            if A.enclosing(src, node, (ast.FunctionDef, ast.AsyncFunctionDef)) is not func:
                continue
            outer = _scalar_op(src, node, scalars, tiles, outer=True)
            if outer is None:
                continue
            stmt = A.statement_of(src, node)
            inl = P.Inlining(src, func, stmt)
            inner_node = inl.look(outer.data)
            inner = _scalar_op(src, inner_node, scalars, tiles, outer=False)
            if inner is None or inner.kind != outer.kind or not inl.safe():
                continue
            if not P.is_tile(src, inner.data, tiles):
                continue
            seg = src.segment
            parts = [f"data={seg(inner.data)}", f"op0={inner.op}", f"operand0={seg(inner.operand)}"]
            if inner.reverse:
                parts.append(f"reverse0={inner.reverse}")
            parts += [f"op1={outer.op}", f"operand1={seg(outer.operand)}"]
            if outer.reverse:
                parts.append(f"reverse1={outer.reverse}")
            parts += [f"{k}={seg(v)}" for k, v in outer.extra.items()]
            text = f"{src.prefix('nisa')}.tensor_scalar({', '.join(parts)})"
            site = P.label(src, stmt)
            out.append(Candidate(
                src, site, f"merge two scalar ops ({inner.op} then {outer.op}) into one two-op "
                f"tensor_scalar in '{site}'",
                (lambda n=node, t=text, i=inl: [src.replace_node(n, t)] + i.deletions()),
                {"target": site}, {"instructions": 1.0, "vector": 0.5, "scalar": 0.5}, 58.0))
    return out
