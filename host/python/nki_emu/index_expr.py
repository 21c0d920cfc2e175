"""Index expressions (``nl.arange``, ``nl.mgrid``) and masks.

An :class:`IndexExpr` is an affine integer expression over an n-D index grid,
``value[g] = const + sum_a coef[a] * g[a]`` for ``0 <= g[a] < sizes[a]``; it is
what ``nl.arange(n)[:, None]``, ``128 * i + nl.arange(128)[None, :]`` etc.
evaluate to (docs/nki-facts.md, "Indexing"). Comparisons give a
:class:`Predicate` (docs/nki-facts.md, "Masks"); :func:`mask_array` turns a
``mask=`` argument into a boolean array. How an index tuple selects elements of
a tensor is ``nki_emu.layout``'s business.
"""

import numpy as np

from .errors import fail



def is_int(x):
    """True for Python/NumPy integers (and LoopIndex), False for bools and anything else."""
    # isinstance, never operator.index: an NkiTensor's __index__ is a refusal (its values
    # cannot become Python numbers), not a "no".
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


_FULL = slice(None)


def _expansion_signature(key):
    """(None or 0 per entry) for keys made of ``None`` and ``:`` only, else None."""
    sig = []
    for k in key:
        if k is None:
            sig.append(None)
        elif type(k) is slice and k == _FULL:
            sig.append(0)
        else:
            return None
    return tuple(sig)


class IndexExpr:
    """Affine index over a grid; see the module docstring.

    ``sizes``/``coefs``: tuples with one entry per grid axis; ``const``: int.
    """

    __slots__ = ("const", "coefs", "sizes", "_sub")

    def __init__(self, const, coefs, sizes):
        self.const = int(const)
        self.coefs = tuple(int(c) if s > 1 else 0 for c, s in zip(coefs, sizes))
        self.sizes = tuple(int(s) for s in sizes)
        self._sub = None  # cache of [:, None]-style expansions (expressions are immutable)

    # --- shape -----------------------------------------------------------
    @property
    def ndim(self):
        return len(self.sizes)

    @property
    def shape(self):
        return self.sizes

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        sig = _expansion_signature(key)
        if sig is not None and self._sub is not None and sig in self._sub:
            return self._sub[sig]
        out = self._expand(key)
        if sig is not None:
            if self._sub is None:
                self._sub = {}
            self._sub[sig] = out
        return out

    def _expand(self, key):
        axes = [i for i, k in enumerate(key) if isinstance(k, slice)]
        if len(axes) != self.ndim or any(k is not None and not isinstance(k, slice) for k in key):
            raise IndexError("index expressions only support [:, None]-style expansion")
        coefs, sizes = [0] * len(key), [1] * len(key)
        for src, dst in enumerate(axes):
            coefs[dst], sizes[dst] = self.coefs[src], self.sizes[src]
        return IndexExpr(self.const, coefs, sizes)

    # --- arithmetic ------------------------------------------------------
    def padded(self, ndim):
        """(coefs, sizes) left-padded with (0, 1) entries to ``ndim`` grid axes."""
        k = ndim - self.ndim
        return (0,) * k + self.coefs, (1,) * k + self.sizes

    def _combine(self, other, sign):
        if is_int(other):
            return IndexExpr(self.const + sign * int(other), self.coefs, self.sizes)
        if isinstance(other, IndexExpr):
            ndim = max(self.ndim, other.ndim)
            ca, sa = self.padded(ndim)
            cb, sb = other.padded(ndim)
            sizes = []
            for x, y in zip(sa, sb):
                if x != y and 1 not in (x, y):
                    raise ValueError(f"index expressions of shapes {self.sizes} and {other.sizes} do not broadcast")
                sizes.append(max(x, y))
            coefs = [a + sign * b for a, b in zip(ca, cb)]
            return IndexExpr(self.const + sign * other.const, coefs, sizes)
        return NotImplemented

    def __add__(self, other):
        if isinstance(other, np.ndarray):
            return np.asarray(self) + other
        return self._combine(other, 1)

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, np.ndarray):
            return np.asarray(self) - other
        return self._combine(other, -1)

    def __rsub__(self, other):
        return (-self)._combine(other, 1)

    def __neg__(self):
        return IndexExpr(-self.const, [-c for c in self.coefs], self.sizes)

    def __mul__(self, other):
        if is_int(other):
            k = int(other)
            return IndexExpr(self.const * k, [c * k for c in self.coefs], self.sizes)
        return np.asarray(self) * np.asarray(other)

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return np.asarray(self) // np.asarray(other)

    def __mod__(self, other):
        return np.asarray(self) % np.asarray(other)

    def __array__(self, dtype=None):
        out = np.full(self.sizes, self.const, dtype=np.int64)
        for axis, (c, n) in enumerate(zip(self.coefs, self.sizes)):
            if c:
                shape = [1] * self.ndim
                shape[axis] = n
                out = out + c * np.arange(n).reshape(shape)
        return out if dtype is None else out.astype(dtype)

    # --- predicates ------------------------------------------------------
    def _cmp(self, other, op):
        return Predicate.leaf(self - other, op)

    def __ge__(self, other):
        return self._cmp(other, ">=")

    def __gt__(self, other):
        return self._cmp(other, ">")

    def __le__(self, other):
        return self._cmp(other, "<=")

    def __lt__(self, other):
        return self._cmp(other, "<")

    def __eq__(self, other):
        return self._cmp(other, "==")

    def __ne__(self, other):
        return self._cmp(other, "!=")

    __hash__ = object.__hash__

    def __bool__(self):
        fail("err_control_flow_condition_depending_on_arange",
             "Control-flow depending on `nl.arange` or `nl.mgrid` is not supported.")

    def __repr__(self):
        return f"IndexExpr(const={self.const}, coefs={self.coefs}, sizes={self.sizes})"


_OPS = {">=": np.greater_equal, ">": np.greater, "<=": np.less_equal,
        "<": np.less, "==": np.equal, "!=": np.not_equal}


class Predicate:
    """A mask: comparisons of affine expressions combined with ``&``/``|``/``~``.

    ``kind`` is "leaf" (``expr op 0``), "and", "or" or "not".
    """

    __slots__ = ("kind", "expr", "op", "parts")

    def __init__(self, kind, expr=None, op=None, parts=()):
        self.kind, self.expr, self.op, self.parts = kind, expr, op, tuple(parts)

    @staticmethod
    def leaf(expr, op):
        if is_int(expr):
            expr = IndexExpr(int(expr), (), ())
        return Predicate("leaf", expr=expr, op=op)

    def __and__(self, other):
        return Predicate("and", parts=(self, other))

    def __or__(self, other):
        return Predicate("or", parts=(self, other))

    def __invert__(self):
        return Predicate("not", parts=(self,))

    def __bool__(self):
        fail("err_control_flow_condition_depending_on_arange",
             "Control-flow depending on `nl.arange` or `nl.mgrid` is not supported.")

    def constant(self, shape):
        """True/False when the predicate holds everywhere/nowhere on a grid of ``shape``,
        else None. Decided from the range of each affine expression over its grid, without
        building arrays: a masked loop's full tiles (all but the tail) need no mask."""
        if self.kind == "leaf":
            expr = self.expr
            sizes = expr.sizes
            if len(sizes) > len(shape) or any(a != 1 and a != b for a, b in zip(reversed(sizes), reversed(shape))):
                return None  # not a broadcast of the grid: evaluate() reports it
            lo = hi = expr.const
            for c, n in zip(expr.coefs, sizes):
                span = c * (n - 1)
                if span < 0:
                    lo += span
                else:
                    hi += span
            return _RANGE_TESTS[self.op](lo, hi)
        values = [p.constant(shape) for p in self.parts]
        if self.kind == "not":
            return None if values[0] is None else not values[0]
        if self.kind == "and":
            return False if False in values else (True if all(v is True for v in values) else None)
        return True if True in values else (False if all(v is False for v in values) else None)

    def evaluate(self, shape):
        """Boolean array of ``shape`` (grids aligned to the right, like NumPy)."""
        if self.kind == "leaf":
            vals = np.asarray(self.expr)
            return np.broadcast_to(_OPS[self.op](vals, 0), _right_pad(vals.shape, shape))
        arrays = [p.evaluate(shape) for p in self.parts]
        if self.kind == "and":
            return np.broadcast_to(np.logical_and(*arrays), shape)
        if self.kind == "or":
            return np.broadcast_to(np.logical_or(*arrays), shape)
        return np.broadcast_to(np.logical_not(arrays[0]), shape)


# op -> f(lowest, highest value of expr) = True (holds for all), False (for none) or None
_RANGE_TESTS = {
    ">=": lambda lo, hi: True if lo >= 0 else (False if hi < 0 else None),
    ">": lambda lo, hi: True if lo > 0 else (False if hi <= 0 else None),
    "<=": lambda lo, hi: True if hi <= 0 else (False if lo > 0 else None),
    "<": lambda lo, hi: True if hi < 0 else (False if lo >= 0 else None),
    "==": lambda lo, hi: True if lo == hi == 0 else (False if lo > 0 or hi < 0 else None),
    "!=": lambda lo, hi: False if lo == hi == 0 else (True if lo > 0 or hi < 0 else None),
}


def _right_pad(src, shape):
    return tuple(shape) if len(src) <= len(shape) else src


def mask_array(mask, shape):
    """Returns None (all true) or a boolean array of ``shape`` for a ``mask=`` value."""
    if mask is None:
        return None
    if isinstance(mask, Predicate):
        if mask.constant(shape) is True:
            return None
        arr = np.broadcast_to(mask.evaluate(shape), shape)
    else:
        arr = np.broadcast_to(np.asarray(mask, dtype=bool), shape)
    return None if arr.all() else arr


_ARANGE = {}


def arange(*args):
    """``nl.arange([start,] stop[, step])`` -> 1-D IndexExpr (cached: expressions are immutable)."""
    e = _ARANGE.get(args)  # ints (and LoopIndex ints) hash and compare as their value
    if e is None:
        key = tuple(int(a) for a in args)
        e = _ARANGE[key] = _arange(*key)
    return e


def _arange(*args):
    if len(args) == 1:
        start, stop, step = 0, args[0], 1
    elif len(args) == 2:
        (start, stop), step = args, 1
    else:
        start, stop, step = args
    n = max(0, -(-(int(stop) - int(start)) // int(step)))
    return IndexExpr(start, (step,), (n,))


class _Grid(tuple):
    """Result of ``nl.mgrid[...]``: unpackable, with ``.p``, ``.x``, ``.y``, ``.z``."""

    @property
    def p(self):
        return self[0]

    @property
    def x(self):
        return self[1]

    @property
    def y(self):
        return self[2]

    @property
    def z(self):
        return self[3]


class _MGrid:
    """``nl.mgrid[0:128, 0:512]``: one IndexExpr per axis of a dense grid."""

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        sizes, starts, steps = [], [], []
        for k in key:
            start, stop, step = k.start or 0, k.stop, k.step or 1
            starts.append(start)
            steps.append(step)
            sizes.append(max(0, -(-(stop - start) // step)))
        exprs = []
        for axis in range(len(key)):
            coefs = [0] * len(key)
            coefs[axis] = steps[axis]
            sz = [1] * len(key)
            sz[axis] = sizes[axis]
            exprs.append(IndexExpr(starts[axis], coefs, sz))
        return _Grid(exprs)


mgrid = _MGrid()
