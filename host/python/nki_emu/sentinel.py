"""Written-element coverage without a mask: a NaN sentinel in unwritten HBM elements.

The coverage rule (nki_emu.coverage, docs/isolation.md ``unwritten_output``) needs to
know which elements of a kernel-allocated HBM tensor a store wrote. A bool mask costs one
byte per element (256 MB for bmm's 1 GiB output, issue 14). For a float tensor allocated
uninitialised (the usual ``nl.ndarray(..., buffer=nl.shared_hbm)`` output) the emulator
instead fills the storage with :data:`one quiet NaN bit pattern <PATTERNS>` that no
arithmetic produces from written data and checks, after every write into such a tensor,
that the stored values do not hold that pattern. While that holds, an element holds the
pattern exactly when no store wrote it, so the data itself is the mask. A write that
stores the pattern (a kernel copying unwritten memory, whose NaN payload NumPy keeps)
turns the tensor back to an exact bool mask (:func:`mask_from`), so the rule's answer and
its message are never changed: only the memory it costs.

Bit patterns are compared as unsigned integers of the storage width (NaN != NaN).
"""
import numpy as np

# Quiet NaNs with a payload NumPy never makes itself (np.nan is 0x7fc00000 / 0x7e00 /
# 0x7ff8000000000000), per storage dtype.
PATTERNS = {
    np.dtype(np.float16): np.uint16(0x7E5B),
    np.dtype(np.float32): np.uint32(0x7FD5A17E),
    np.dtype(np.float64): np.uint64(0x7FFA5A17E0C3A5B1),
}
# Elements compared per step when counting (bounds the temporary bool array: 4 MB).
CHUNK_ELEMENTS = 4 << 20


def supports(sdtype):
    """True when storage dtype ``sdtype`` (NumPy dtype) has a sentinel pattern."""
    return np.dtype(sdtype) in PATTERNS


def fill_value(sdtype):
    """The sentinel as a value of storage dtype ``sdtype`` (a NaN), for ``np.full``."""
    pattern = PATTERNS[np.dtype(sdtype)]
    return np.array(pattern).view(np.dtype(sdtype))[()]


def _bits(values):
    """``values`` (a float array, any strides) viewed as unsigned integers of its width."""
    values = np.asarray(values)
    return values.view(PATTERNS[values.dtype].dtype)


def holds(values, where=None):
    """True when any element of float array ``values`` (selected by bool ``where``,
    broadcast to its shape, if given) is the sentinel of its dtype."""
    hits = _bits(values) == PATTERNS[np.asarray(values).dtype]
    if where is not None:
        hits &= np.broadcast_to(where, hits.shape)
    return bool(hits.any())


def mask_from(data):
    """Exact written-element mask of batched storage ``data`` ((S,) + shape): True where
    the element is not the sentinel. Shape ``shape`` when every member agrees (the
    usual case), else (S,) + shape (members diverged: indirect stores)."""
    written = _bits(data) != PATTERNS[data.dtype]
    if written.shape[0] == 1 or bool((written == written[:1]).all()):
        return np.ascontiguousarray(written[0])
    return written


def missing(values):
    """Unwritten elements of batched values ``values`` ((S,) + shape, any strides): an
    element counts as written only if no member holds the sentinel there. Returns
    (count, index of the first one in C order as a tuple, or None when none), counting
    in chunks of the first axis after the batch axis (never a full-size temporary)."""
    values = np.asarray(values)
    shape = values.shape[1:]
    if not shape:
        hit = bool((_bits(values) == PATTERNS[values.dtype]).any())
        return (1, ()) if hit else (0, None)
    pattern = PATTERNS[values.dtype]
    bits = _bits(values)
    row = int(np.prod(shape[1:], dtype=np.int64))
    rows = max(1, CHUNK_ELEMENTS // max(1, row * values.shape[0]))
    count, first = 0, None
    for start in range(0, shape[0], rows):
        hits = (bits[:, start:start + rows] == pattern).any(axis=0)
        found = int(np.count_nonzero(hits))
        if found and first is None:
            flat = start * row + int(np.argmax(hits.reshape(-1)))
            first = tuple(int(i) for i in np.unravel_index(flat, shape))
        count += found
    return count, first
