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

from . import analysis as A
from . import patterns as P
from .base import Candidate
from .imports import isa_prefix
from .walk import walk

NAME = "scale_to_activation"
SUMMARY = "Compute x * s on ScalarE as activation(op=nl.copy, scale=s) instead of a VectorE/auto multiply."


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


_REDUCE = {"nl.sum", "nl.max", "nl.min", "nl.mean", "nl.prod", "nisa.tensor_reduce"}
_UNARY = {"nl.rsqrt", "nl.sqrt", "nl.exp", "nl.log", "nl.reciprocal", "nl.negative", "nl.abs", "nl.square"}
_BINARY = {"nl.add", "nl.subtract", "nl.multiply", "nl.divide"}


class _ScalarsOrParams:
    """Provable scalars plus the function's parameters (a parameter combined with a column is
    a scalar such as ``eps``, or itself a column; anything wider fails the activation's
    (P, 1) scale check in the profile stage)."""

    def __init__(self, scalars, func):
        self.scalars = scalars
        self.params = {a.arg for a in func.args.args + func.args.kwonlyargs + func.args.posonlyargs}

    def is_scalar(self, expr):
        return self.scalars.is_scalar(expr) or (isinstance(expr, ast.Name) and expr.id in self.params)


def column_names(src, func, scalars):
    """Names of ``func`` bound only to (P, 1) column tiles (see the module docstring)."""
    scalars = _ScalarsOrParams(scalars, func)
    defs = A.bindings(func)
    # greatest fixpoint: ``mean = nl.add(mean, eps)`` keeps a column a column
    cols = {name for name, values in defs.items() if values and all(v is not None for v in values)}
    changed = True
    while changed:
        changed = False
        for name in sorted(cols):
            if not all(_column(src, v, cols, scalars) for v in defs[name]):
                cols.discard(name)
                changed = True
    return cols


def _column(src, v, cols, scalars):
    if isinstance(v, ast.Name):
        return v.id in cols
    if isinstance(v, ast.BinOp) and isinstance(v.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        return (_column(src, v.left, cols, scalars) and scalars.is_scalar(v.right)) or \
            (_column(src, v.right, cols, scalars) and scalars.is_scalar(v.left))
    qual = src.call_name(v)
    if qual in _REDUCE:
        axis = [k.value for k in v.keywords if k.arg == "axis"]
        return len(axis) == 1 and ast.dump(axis[0]) in (ast.dump(ast.List([ast.Constant(1)], ast.Load())),
                                                        ast.dump(ast.Constant(1)))
    if qual in _UNARY and len(v.args) == 1:
        return _column(src, v.args[0], cols, scalars)
    if qual in _BINARY and len(v.args) == 2:
        a, b = v.args
        return (_column(src, a, cols, scalars) and (scalars.is_scalar(b) or _column(src, b, cols, scalars))) or \
            (_column(src, b, cols, scalars) and scalars.is_scalar(a))
    if qual == "nisa.activation":
        data = [k.value for k in v.keywords if k.arg == "data"]
        return len(data) == 1 and _column(src, data[0], cols, scalars)
    return False


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
