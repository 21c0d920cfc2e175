"""Rule ``block_dim``: a free dimension of an SBUF tensor that every access indexes with one scalar
becomes a block dimension, so each of its slices is a tile of its own.

Before (gqa_full: the transposed keys of all eight heads share one tile per block; a head reads its
2 KiB, but the 16 KiB tile stays live, for every head)::

    v12 = nl.ndarray((2, 4, nl.par_dim(128), 8, 512), dtype=np.float32, buffer=nl.sbuf)
    v12[i3, i4, nl.arange(128)[:, None], i6, 128 * i5 + nl.arange(128)[None, :]] = nl.copy(...)
    ... nisa.nc_matmul(..., v12[i3, i9, nl.arange(128)[:, None], i8 + 4 * i7, nl.arange(512)[None, :]]) ...

After::

    v12 = nl.ndarray((8, 2, 4, nl.par_dim(128), 512), dtype=np.float32, buffer=nl.sbuf)
    v12[i6, i3, i4, nl.arange(128)[:, None], 128 * i5 + nl.arange(128)[None, :]] = nl.copy(...)
    ... nisa.nc_matmul(..., v12[i8 + 4 * i7, i3, i9, nl.arange(128)[:, None], nl.arange(512)[None, :]]) ...

Preconditions (else no candidate): ``T`` is an SBUF block tensor (``cstyle.allocations``) mentioned only
through full-rank subscripts (``cstyle.accesses``); in every access the entry of the chosen free
dimension holds no ``nl.arange`` (a scalar: the accessed tile does not span that dimension, so its shape
is unchanged); another free dimension remains; one block of ``T`` is at least 2 KiB per partition and the
dimension has at least 2 entries. The values are unchanged (the same elements, addressed in another
order).

Effect: the block dimensions of an SBUF tensor are logical tiles that the compiler allocates only while
they are live (nki-facts §2.1, block dimensions); a slice that lives in a free dimension keeps the whole
tile live as long as any slice is used. As a block, each slice lives only as long as it is used, which
shrinks the working set where consumers use one slice at a time (nki-facts §3.4).
"""
import ast

from .. import analysis as A
from .. import cstyle as C
from ..base import Candidate
from ..errors import NotApplicable

NAME = "block_dim"
SUMMARY = "Turn a free dimension that every access indexes with a scalar into a block dimension (one tile per slice)."
EFFECT = ("SBUF working set: block dimensions are tiles allocated only while live, so a slice used alone "
          "stops keeping its neighbours resident (nki-facts §2.1, §3.4)")
GAIN = 0.2  # share of the relieved resources' busy time the move removes (docs/rules.md)
RELIEVES = {"dma": 0.6}  # resource -> weight (docs/rules.md)
ORDER = 29  # position among the built-in rules when proposals tie (docs/rules.md)
MIN_BLOCK_BYTES = 2048


def candidates(src):
    """One candidate per (tensor, dimension)."""
    out = []
    for func in A.functions(src.tree):
        for alloc in C.allocations(src, func).values():
            if alloc.buffer != "sbuf" or not src.owns_lines(alloc.stmt):
                continue
            try:
                acc = C.accesses(src, func, alloc)
            except NotApplicable:
                continue
            if not acc:
                continue
            block = alloc.free_bytes()
            if block is None or block < MIN_BLOCK_BYTES:
                continue
            free = range(alloc.par + 1, alloc.rank)
            if len(free) < 2:
                continue
            for d in free:
                n = alloc.dims[d]
                if n is None or n < 2 or not all(_scalar(src, C.entries(sub)[d]) for sub, _ in acc):
                    continue
                out.append(_cand(src, alloc, acc, d))
    return out


def _scalar(src, entry):
    if isinstance(entry, ast.Slice):
        return False
    try:
        return not C.aranges(src, entry)
    except NotApplicable:
        return False


def _cand(src, alloc, acc, d):
    name = alloc.name

    def order(nodes):
        return [nodes[d]] + [e for i, e in enumerate(nodes) if i != d]

    def edits():
        shape = alloc.call.args[0]
        out = [src.replace_node(shape, "(" + ", ".join(src.segment(e) for e in order(alloc.entries)) + ")")]
        for sub, _ in acc:
            out.append(src.replace_node(sub.slice, ", ".join(src.segment(e) for e in order(C.entries(sub)))))
        return out

    block = alloc.free_bytes() // alloc.dims[d]
    return Candidate(src, f"{name}/{d}",
                     f"make dimension {d} of {name} ({alloc.dims[d]} entries) a block dimension: "
                     f"{alloc.dims[d]} tiles of {block} bytes per partition instead of one",
                     edits, {"tensor": name, "dim": d, "entries": alloc.dims[d], "block_bytes": block},
                     {"dma": 0.6}, 55.0)
