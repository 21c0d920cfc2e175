"""Layout resolution: what an index tuple selects in a tensor.

A :class:`Layout` is an affine view of a root buffer (element offset, shape,
element strides). :func:`resolve` maps a layout and an index tuple (ints,
slices, ``None``, ``...``, :class:`~nki_emu.index_expr.IndexExpr`, integer
arrays) to a new layout, so that both basic and arange ("advanced") indexing
produce views without copying; an out-of-bound or non-affine index gives a
:class:`Gather` (flat element indices plus an in-bound mask) instead. Errors
are the neuronxcc codes listed in docs/nki-facts.md ("Validation rules").
"""
import weakref

import numpy as np

from .errors import fail
from .index_expr import IndexExpr, is_int

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
    model's load key). In a batched run whose members' index values differ
    (:func:`stack_gathers`), those describe the traced member and
    :func:`gather_members` holds every member's indices.
    """

    __slots__ = ("shape", "__weakref__")

    def __init__(self, flat, inb, oob_message, signature=None, members=None):
        self.shape = flat.shape
        _GATHERS[self] = [flat, inb, oob_message, signature, members]


_GATHERS = weakref.WeakKeyDictionary()  # Gather -> [flat, inb, oob message, signature, members] (internal)


def gather_flat(g):
    """Root element indices of Gather ``g`` (int64 array of the grid's shape; the traced
    member's when the members' indices differ)."""
    return _GATHERS[g][0]


def gather_inb(g):
    """In-bound mask of Gather ``g`` (bool array), or None when every index is in bound
    (the traced member's when the members' indices differ)."""
    return _GATHERS[g][1]


def gather_members(g):
    """(indices (S,) + grid, in-bound mask (S,) + grid or None) of a gather whose members'
    indices differ (an indirect access in a batched run), else None (one grid for all)."""
    return _GATHERS[g][4]


def stack_gathers(parts, trace_member):
    """One Gather for the per-member gathers ``parts`` of a batched indirect access (same
    grid). Equal indices give ``parts[0]``; otherwise the result carries every member's
    indices (:func:`gather_members`), and the traced member's indices, bounds and
    signature (what the cost trace records). Its out-of-bound message is the first
    out-of-bound member's."""
    entries = [_GATHERS[g] for g in parts]
    first = entries[0]
    if all(np.array_equal(e[0], first[0]) and (e[1] is None) == (first[1] is None)
           and (e[1] is None or np.array_equal(e[1], first[1])) for e in entries[1:]):
        return parts[0]
    flat = np.stack([e[0] for e in entries])
    inb = None
    if any(e[1] is not None for e in entries):
        inb = np.stack([np.ones(first[0].shape, bool) if e[1] is None else e[1] for e in entries])
    message = next((e[2] for e in entries if e[2] is not None), None)
    traced = entries[trace_member]
    return Gather(traced[0], traced[1], message, traced[3], (flat, inb))


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
    still use it (nki-facts §2.3).
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
        for axis, n in enumerate(e.padded(ndim)[1]):
            if n != 1:
                grid[axis] = n if grid[axis] == 1 else grid[axis]
    gstrides, spans = [0] * ndim, []
    for dim, k in enumerate(key):
        if type(k) is not IndexExpr:
            spans.append((0, 0))
            continue
        coefs, sizes = k.padded(ndim)
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
        if is_int(k):
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
        for axis, n in enumerate(e.padded(ndim)[1]):
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
                coefs, sizes = k.padded(ndim)
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
        if is_int(k):
            lo = hi = int(k)
            offset += lo * st
        else:
            coefs, sizes = k.padded(ndim)
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
    if is_int(k):
        return int(k)
    arr = np.asarray(k)
    return ("array", arr.shape, str(arr.dtype), arr.tobytes())
