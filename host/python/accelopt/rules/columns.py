"""Column tiles: names bound only to (P, 1) row statistics, shared by ``scale_to_activation``,
``reduce_to_activation`` and ``row_scale_tiles``.

A column is ``nl.sum/max/min/mean/prod(..., axis=[1])`` or ``nisa.tensor_reduce(..., axis=[1])``,
a unary or binary elementwise function of columns and provable scalars (e.g.
``nl.rsqrt(nl.sum(sq, axis=[1]) / K)``), an activation of a column, or a name bound only to
columns. A kernel parameter counts as a scalar operand here.
"""
import ast

from . import analysis as A

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
    """Names of ``func`` bound only to (P, 1) column tiles (the column forms are listed above)."""
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

