"""Index expressions (``nl.arange``, ``nl.mgrid``), masks and index resolution.

An :class:`IndexExpr` is an affine integer expression over an n-D index grid,
``value[g] = const + sum_a coef[a] * g[a]`` for ``0 <= g[a] < sizes[a]``; it is
what ``nl.arange(n)[:, None]``, ``128 * i + nl.arange(128)[None, :]`` etc.
evaluate to (spec 2.2). Comparisons give a :class:`Predicate` (spec 2.3).

:func:`resolve` maps a tensor layout (element offset, shape, element strides
relative to a root buffer) and an index tuple to a new layout, so that both
basic and arange ("advanced") indexing produce views without copying; an
out-of-bound or non-affine index gives a :class:`Gather` (flat element indices
plus an in-bound mask) instead. Errors are the neuronxcc codes of spec 4.14.
"""
import operator
import weakref

import numpy as np

from .errors import fail


def _is_int(x):
    if isinstance(x, (bool, np.bool_)):
        return False
    try:
        operator.index(x)
        return True
    except TypeError:
        return False


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
    def _pad(self, ndim):
        k = ndim - self.ndim
        return (0,) * k + self.coefs, (1,) * k + self.sizes

    def _combine(self, other, sign):
        if _is_int(other):
            return IndexExpr(self.const + sign * int(other), self.coefs, self.sizes)
        if isinstance(other, IndexExpr):
            ndim = max(self.ndim, other.ndim)
            ca, sa = self._pad(ndim)
            cb, sb = other._pad(ndim)
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
        if _is_int(other):
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
        if _is_int(expr):
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


class Layout:
    """Affine view of a root buffer: element ``offset``, ``shape``, element ``strides``."""

    __slots__ = ("offset", "shape", "strides", "_span")

    def __init__(self, offset, shape, strides):
        self.offset, self.shape, self.strides = offset, tuple(shape), tuple(strides)
        self._span = None

    def span(self):
        """(lowest, highest) root element offset touched (computed once: layouts are immutable)."""
        if self._span is not None:
            return self._span
        lo = hi = self.offset
        for n, s in zip(self.shape, self.strides):
            if n > 1:
                if s < 0:
                    lo += s * (n - 1)
                else:
                    hi += s * (n - 1)
        self._span = (lo, hi)
        return self._span


class Gather:
    """Non-view access over an index grid of ``shape``.

    Its root element indices come from tensor values for an indirect access
    (``t[idx_tile[...], ...]``), so they are kept outside the object, in
    :data:`_GATHERS`, where a kernel holding the view cannot read them:
    :func:`gather_flat` (root element indices, grid shape), :func:`gather_inb`
    (in-bound mask or None), :func:`gather_oob_message` and
    :func:`gather_signature` (a hashable value equal for equal accesses: the cost
    model's load key).
    """

    __slots__ = ("shape", "__weakref__")

    def __init__(self, flat, inb, oob_message, signature=None):
        self.shape = flat.shape
        _GATHERS[self] = [flat, inb, oob_message, signature]


_GATHERS = weakref.WeakKeyDictionary()  # Gather -> [flat, inb, oob message, signature] (internal)


def gather_flat(g):
    """Root element indices of Gather ``g`` (int64 array of the grid's shape)."""
    return _GATHERS[g][0]


def gather_inb(g):
    """In-bound mask of Gather ``g`` (bool array), or None when every index is in bound."""
    return _GATHERS[g][1]


def gather_oob_message(g):
    """The err_tensor_access_out_of_bound message of Gather ``g`` (None when in bound)."""
    return _GATHERS[g][2]


def gather_signature(g):
    """Hashable description of Gather ``g``'s access (equal accesses, equal value)."""
    return _GATHERS[g][3]


def hide_indices(g, message):
    """Replaces the out-of-bound message of an indirect access with ``message``: one
    without index values, which are data (a kernel could read them from the error)."""
    entry = _GATHERS[g]
    if entry[2] is not None:
        entry[2] = message


def _oob_message(name, dim, lo, hi, size):
    return (f"Out-of-bound access for tensor `{name}` on dimension {dim}: "
            f"index range [{lo}, {hi}] exceed dimension size of {size}")


def resolve(layout, key, name):
    """Applies index ``key`` to ``layout``; returns a Layout or a Gather.

    Raises NKICompileError for mixing basic and advanced indexing, 1-D arange
    and static out-of-bound basic indexing. Out-of-bound arange indexing is
    returned as a Gather carrying the message, so that masked callers can
    still use it (spec 2.3).
    """
    if not isinstance(key, tuple):
        key = (key,)
    fast = _affine_fast(layout, key)
    if fast is not None:
        return fast
    advanced = any(isinstance(k, (IndexExpr, np.ndarray, list)) for k in key)
    basic = any(k is None or k is Ellipsis or isinstance(k, slice) for k in key)
    if advanced and basic:
        fail("err_unsupported_mixing_basic_advanced_tensor_indexing",
             "Mixing basic tensor indexing and advanced tensor indexing is not supported.")
    if advanced:
        return _advanced(layout, key, name)
    return _basic(layout, key, name)


_TEMPLATES = {}  # (shape, strides, key signature) -> (grid, grid strides, [(dim, lo, hi, size)])
_TEMPLATE_LIMIT = 4096


def _affine_fast(layout, key):
    """Layout for the common key of NKI kernels (one int or IndexExpr per dimension, at
    least one IndexExpr of rank >= 2, all in bounds), or None for the general path.

    Index expressions of one statement differ between loop iterations only in their
    constants, so the grid and strides are cached per (layout geometry, coefficients,
    sizes); each call adds the constants and checks the bounds."""
    shape = layout.shape
    if len(key) != len(shape):
        return None
    sig = []
    for k in key:
        if type(k) is IndexExpr:
            sig.append((k.coefs, k.sizes))
        elif isinstance(k, int) and not isinstance(k, bool):
            sig.append(None)
        else:
            return None
    tkey = (shape, layout.strides, tuple(sig))
    template = _TEMPLATES.get(tkey)
    if template is None:
        template = _make_template(layout, key)
        if len(_TEMPLATES) >= _TEMPLATE_LIMIT:
            _TEMPLATES.clear()
        _TEMPLATES[tkey] = template
    if template is False:
        return None
    grid, gstrides, spans = template
    offset = layout.offset
    strides = layout.strides
    for dim, k in enumerate(key):
        c = k if type(k) is not IndexExpr else k.const
        lo, hi = spans[dim]
        if c + lo < 0 or c + hi >= shape[dim]:
            return None  # out of bound: the general path reports or gathers it
        offset += c * strides[dim]
    return Layout(offset, grid, gstrides)


def _make_template(layout, key):
    """(grid, grid strides, per-dimension (low, high) span of the non-constant part) for
    a key of ints and IndexExprs, or False when the general path must handle it."""
    exprs = [k for k in key if type(k) is IndexExpr]
    if not exprs or all(e.ndim == 1 for e in exprs):
        return False
    ndim = max(e.ndim for e in exprs)
    grid = [1] * ndim
    for e in exprs:
        for axis, n in enumerate(e._pad(ndim)[1]):
            if n != 1:
                grid[axis] = n if grid[axis] == 1 else grid[axis]
    gstrides, spans = [0] * ndim, []
    for dim, k in enumerate(key):
        if type(k) is not IndexExpr:
            spans.append((0, 0))
            continue
        coefs, sizes = k._pad(ndim)
        lo = hi = 0
        for axis, (c, n) in enumerate(zip(coefs, sizes)):
            if n > 1 and grid[axis] != n:
                return False
            if c:
                span = c * (grid[axis] - 1)
                lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
                gstrides[axis] += c * layout.strides[dim]
        spans.append((lo, hi))
    return tuple(grid), tuple(gstrides), tuple(spans)


def _basic(layout, key, name):
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > len(layout.shape):
        raise IndexError(f"too many indices for tensor `{name}` of rank {len(layout.shape)}")
    expanded = []
    for k in key:
        if k is Ellipsis:
            expanded.extend([slice(None)] * (len(layout.shape) - n_real))
        else:
            expanded.append(k)
    while sum(1 for k in expanded if k is not None) < len(layout.shape):
        expanded.append(slice(None))
    offset, shape, strides, dim = layout.offset, [], [], 0
    for k in expanded:
        if k is None:
            shape.append(1)
            strides.append(0)
            continue
        n, st = layout.shape[dim], layout.strides[dim]
        if _is_int(k):
            i = int(k)
            if i < 0 or i >= n:
                fail("err_tensor_access_out_of_bound", _oob_message(name, dim, i, i, n))
            offset += i * st
        else:
            start = 0 if k.start is None else int(k.start)
            stop = n if k.stop is None else int(k.stop)
            step = 1 if k.step is None else int(k.step)
            if start < 0 or stop > n:
                fail("err_tensor_access_out_of_bound", _oob_message(name, dim, start, stop - 1, n))
            length = max(0, -(-(stop - start) // step))
            offset += start * st
            shape.append(length)
            strides.append(st * step)
        dim += 1
    return Layout(offset, shape, strides)


def _advanced(layout, key, name):
    rank = len(layout.shape)
    if len(key) > rank:
        raise IndexError(f"too many indices for tensor `{name}` of rank {rank}")
    exprs = [k for k in key if isinstance(k, IndexExpr)]
    if any(e.ndim == 1 for e in exprs) and not any(e.ndim > 1 for e in exprs):
        fail("err_1d_arange_not_supported", f"indexing tensor `{name}` with 1d arange is not supported")
    arrays = [np.asarray(k) for k in key if isinstance(k, (np.ndarray, list))]
    ndim = max([e.ndim for e in exprs] + [a.ndim for a in arrays])
    grid = [1] * ndim
    for e in exprs:
        for axis, n in enumerate(e._pad(ndim)[1]):
            if n != 1:
                grid[axis] = n if grid[axis] == 1 else grid[axis]
    for a in arrays:
        for axis, n in enumerate((1,) * (ndim - a.ndim) + a.shape):
            if n != 1:
                grid[axis] = n
    if len(key) < rank:
        if arrays:
            raise IndexError(f"integer-array index of tensor `{name}` must cover every dimension")
        extra = layout.shape[len(key):]
        padded = []
        for k in key:
            if isinstance(k, IndexExpr):
                coefs, sizes = k._pad(ndim)
                k = IndexExpr(k.const, coefs + (0,) * len(extra), sizes + (1,) * len(extra))
            padded.append(k)
        total = ndim + len(extra)
        for j, n in enumerate(extra):
            coefs, sizes = [0] * total, [1] * total
            coefs[ndim + j], sizes[ndim + j] = 1, n
            padded.append(IndexExpr(0, coefs, sizes))
        key, grid, ndim = tuple(padded), grid + list(extra), total
    if arrays:
        return _gather(layout, key, grid, name)
    offset, gstrides, oob = layout.offset, [0] * ndim, None
    for dim, k in enumerate(key):
        n, st = layout.shape[dim], layout.strides[dim]
        if _is_int(k):
            lo = hi = int(k)
            offset += lo * st
        else:
            coefs, sizes = k._pad(ndim)
            lo = hi = k.const
            for axis, (c, s) in enumerate(zip(coefs, sizes)):
                if s > 1 and grid[axis] != s:
                    raise ValueError(f"index shapes do not broadcast for tensor `{name}`")
                if c:
                    span = c * (grid[axis] - 1)
                    lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
                    gstrides[axis] += c * st
            offset += k.const * st
        if (lo < 0 or hi >= n) and oob is None:
            oob = _oob_message(name, dim, lo, hi, n)
    if oob is not None:
        return _gather(layout, key, grid, name, oob)
    return Layout(offset, grid, gstrides)


def _gather(layout, key, grid, name, oob=None):
    flat = np.full(grid, layout.offset, dtype=np.int64)
    inb = np.ones(grid, dtype=bool)
    for dim, k in enumerate(key):
        idx = np.broadcast_to(np.asarray(k, dtype=np.int64), grid)
        n = layout.shape[dim]
        ok = (idx >= 0) & (idx < n)
        inb &= ok
        flat = flat + np.clip(idx, 0, n - 1) * layout.strides[dim]
    signature = (layout.offset, layout.shape, layout.strides, tuple(_key_signature(k) for k in key))
    if inb.all():
        return Gather(flat, None, None, signature)
    return Gather(flat, inb, oob or _oob_message(name, 0, int(flat.min()), int(flat.max()), flat.size), signature)


def _key_signature(k):
    """Hashable description of one index of a gathered access (equal indices, equal value)."""
    if isinstance(k, IndexExpr):
        return ("expr", k.const, k.coefs, k.sizes)
    if _is_int(k):
        return int(k)
    arr = np.asarray(k)
    return ("array", arr.shape, str(arr.dtype), arr.tobytes())
