"""The batch axis of emulated storage (docs/nki-emulator.md, "Batched execution").

An NKI kernel's instruction stream does not depend on its data (nki-facts §2.4:
control flow on tensor values is refused), so the emulator runs one kernel
call for several input sets at once: every storage array has a leading axis of
``S`` members (``S = runstack.batch()``, 1 for an ordinary run), while tensor
metadata (``NkiTensor.shape``, layouts, masks, the cost trace) describes one
member. A value an instruction computes from tiles is *batched*: shape
``(S,) + tile shape``. A value that does not come from tiles (a Python scalar,
an ``nl.arange`` grid, a memset constant, a mask) is *static*: shape of one
member, the same for all.

These helpers turn static values into batched ones and line up batched
operands the way NumPy lines up one member's arrays (ranks aligned to the
right of the batch axis), so that each member sees exactly the arithmetic of
an unbatched run.
"""
import numpy as np

from .runstack import batch as size  # noqa: F401 - the batch size of the active run


def expand(values, shape):
    """Batched ``values`` (``(S,) + a``) broadcast to ``(S,) + shape``, ranks aligned
    after the batch axis as NumPy aligns one member's arrays. A view (no copy)."""
    values = np.asarray(values)
    lead = len(shape) + 1 - values.ndim
    if lead > 0:
        values = values.reshape(values.shape[:1] + (1,) * lead + values.shape[1:])
    return np.broadcast_to(values, values.shape[:1] + tuple(shape))


def static(values, members=None):
    """A static value (one member's array or a scalar) as a batched C-contiguous array of
    ``members`` (default: the active run's batch size) equal members."""
    values = np.asarray(values)
    n = size() if members is None else members
    return np.ascontiguousarray(np.broadcast_to(values, (n,) + values.shape))


def align(a, b, a_batched=True, b_batched=True):
    """Two operands of an element-wise op with their ranks aligned after the batch axis.

    ``a``/``b``: batched arrays, static NumPy arrays (tile-shaped or smaller) or
    scalars; ``a_batched``/``b_batched`` say which are batched. Only two batched
    arrays of different rank are reshaped (length-1 axes inserted after the batch
    axis), so that ``(S, 128, 512)`` with ``(S, 512)`` pairs like ``(128, 512)``
    with ``(512,)``; a static array already lines up from the right.
    """
    if a_batched and b_batched and isinstance(a, np.ndarray) and isinstance(b, np.ndarray) \
            and a.ndim != b.ndim:
        if a.ndim < b.ndim:
            a = a.reshape(a.shape[:1] + (1,) * (b.ndim - a.ndim) + a.shape[1:])
        else:
            b = b.reshape(b.shape[:1] + (1,) * (a.ndim - b.ndim) + b.shape[1:])
    return a, b


def fit(values, dst_shape, batched=True):
    """``values`` ready to be assigned into a batched destination of ``dst_shape``
    (``(S,) + tile``): the rule of an unbatched write (a source of the same size but
    another rank is reshaped, else NumPy broadcasting), applied to one member.
    ``batched``: False for a static source (same for every member)."""
    values = np.asarray(values)
    if batched:
        if values.shape != dst_shape and values.size == _prod(dst_shape) and values.ndim != len(dst_shape):
            return values.reshape(dst_shape)
        if 1 < values.ndim < len(dst_shape):
            return values.reshape(values.shape[:1] + (1,) * (len(dst_shape) - values.ndim) + values.shape[1:])
        return values
    tile = dst_shape[1:]
    if values.shape != tile and values.size == _prod(tile) and values.ndim != len(tile):
        return values.reshape(tile)
    return values


def reduce_axes(axes):
    """Free-axis numbers of one member (``axis=`` of a reduction) as axes of a batched array."""
    return tuple(a + 1 if a >= 0 else a for a in axes)


def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def reshape(values, *dims):
    """``values.reshape(dims)`` with one ``-1`` after the leading member axis, also for a run
    of no members (a traced program, nki_emu.program), where NumPy cannot infer ``-1``."""
    if values.size or -1 not in dims:
        return values.reshape(dims)
    known = _prod([d for d in dims[1:] if d != -1]) or 1
    rest = _prod(values.shape[1:]) // known
    return values.reshape(tuple(rest if d == -1 else d for d in dims))
