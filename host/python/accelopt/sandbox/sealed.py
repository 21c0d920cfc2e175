"""Sealed memfds: arrays shared between the host, a worker and its candidate process without pipe copies.

The host copies a pass's input arrays once into a memfd and seals it against
writing, growing and shrinking (``F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK``
plus ``F_SEAL_SEAL``; memfd_create(2), fcntl(2) "File Sealing"); the worker and
the candidate process receive the descriptor over a socket pair (SCM_RIGHTS,
host/src/worker/shared_fds.h) and map it read-only. No process can change
the bytes after the seal, a hostile candidate included, so the same memfd may
serve the next pass or the next call. The candidate's outputs come back the
same way: the worker seals the candidate's reply memfd once the candidate is
stopped and hands it to the host, which maps it read-only. Before this, a
pass's inputs were copied five times on their way (host array -> C++ buffer
-> pipe -> worker -> pipe -> candidate) and its outputs three times
(docs/isolation.md "Shared inputs and outputs", issue 14).

A *range* is ``[memfd index, byte offset, byte length]``; the request's
attachments are its ranges in order, so array descriptors (``codec``) refer
to them by index exactly as to piped attachments.
"""
import fcntl
import mmap
import os
import weakref

from .codec import CodecError

INPUT_SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL
ALIGN = 64  # bytes: every array starts on a cache line (NumPy needs its itemsize)
# Inputs below this many bytes still go by pipe: a memfd's few system calls per call
# only pay off once copies cost more (options["shared_min_bytes"] overrides it; tests use 0).
MIN_BYTES = 1 << 20
_MAX_WRITE = 1 << 30  # bytes per pwrite call (Linux moves at most ~2 GiB per call)


def enabled(options):
    """The least input bytes a prepared call shares through a memfd, or None for never: the
    host asked for it (``options["shared_inputs"]``) and ``ACCELOPT_SHARED_INPUTS`` is not
    "0" (A/B runs); ``options["shared_min_bytes"]`` (default MIN_BYTES)."""
    if not options.get("shared_inputs") or os.environ.get("ACCELOPT_SHARED_INPUTS", "1") == "0":
        return None
    least = options.get("shared_min_bytes", MIN_BYTES)
    return least if isinstance(least, int) and not isinstance(least, bool) and least >= 0 else MIN_BYTES


class SealedBuffers:
    """C-contiguous buffers copied once into one sealed memfd.

    ``buffers``: bytes-like objects or C-contiguous ndarrays. Attributes: ``fd``
    (int, owned: closed by :meth:`close` or when the object is collected),
    ``ranges`` (``[[0, offset, nbytes], ...]``, one per buffer, offsets
    ALIGN-aligned), ``nbytes`` (the memfd's size). Raises OSError when the
    system refuses a memfd (no space in /dev/shm's memory accounting, no
    sealing support); callers fall back to piped attachments.
    """

    def __init__(self, buffers, name="accelopt-inputs"):
        views = [memoryview(b).cast("B") for b in buffers]
        offsets, end = [], 0
        for view in views:
            offsets.append(end)
            end += -(-view.nbytes // ALIGN) * ALIGN
        fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, max(end, 1))
            for view, offset in zip(views, offsets):
                done = 0
                while done < view.nbytes:
                    done += os.pwrite(fd, view[done:done + _MAX_WRITE], offset + done)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, INPUT_SEALS)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.nbytes = max(end, 1)
        self.ranges = [[0, offset, view.nbytes] for view, offset in zip(views, offsets)]
        self._close = weakref.finalize(self, os.close, fd)

    def close(self):
        """Closes the memfd (idempotent); receivers keep their own descriptors and mappings."""
        self._close()


def _mapping(fd, flags=mmap.MAP_SHARED):
    """A read-only mapping of the whole of ``fd`` (b"" when it is empty)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return b"", 0
    return mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ), size


def map_ranges(fds, ranges):
    """The attachments of a shared request: read-only memoryviews of ``ranges`` of the memfds
    ``fds`` (descriptor numbers in this process; each is closed once mapped). Raises
    CodecError when a range is malformed or lies outside its memfd. The mappings are private:
    even a page a candidate made writable (mprotect) would be its own copy, never the memfd's."""
    maps = []
    try:
        for fd in fds:
            maps.append(_mapping(int(fd), mmap.MAP_PRIVATE))
    finally:
        for fd in fds:
            os.close(int(fd))
    blobs = []
    for entry in ranges:
        try:
            index, offset, size = (int(x) for x in entry)
        except (TypeError, ValueError) as exc:
            raise CodecError(f"malformed shared range {entry!r}") from exc
        if not 0 <= index < len(maps) or offset < 0 or size < 0 or offset + size > maps[index][1]:
            raise CodecError(f"shared range {entry!r} lies outside its memfd")
        blobs.append(memoryview(maps[index][0])[offset:offset + size])
    return blobs


def map_reply(fd, at, sizes):
    """The attachments of a reply the worker handed over as a sealed memfd: read-only
    memoryviews of consecutive ``sizes`` (bytes) from offset ``at``. ``fd`` stays open (its
    owner closes it; the mapping outlives it). Raises CodecError when they do not fit."""
    mapping, size = _mapping(int(fd))
    at = int(at)
    if at < 0 or at + sum(int(n) for n in sizes) > size:
        raise CodecError(f"the reply memfd holds {size} bytes, fewer than its attachments")
    blobs, offset = [], at
    for n in sizes:
        blobs.append(memoryview(mapping)[offset:offset + int(n)])
        offset += int(n)
    return blobs
