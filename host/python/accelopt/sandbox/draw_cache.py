"""Cache of the published seeds' input sets and reference outputs (trusted side).

Every candidate of a problem is checked on the same published seeds, whose
inputs and reference outputs are a pure function of the reference module's
source and the seed. Drawing them (``np.random`` + ``get_inputs`` +
``forward``) costs more than running a small candidate in the emulator, so
the trusted tier computes them once per (reference source, seed) and keeps
them, read-only, in a byte-bounded LRU. The hidden input set of each call is
never cached: it is drawn fresh from a secret seed every time
(docs/isolation.md, rule R1).
"""
import collections
import hashlib
import os
import threading

import numpy as np

# Default budget in bytes: 1/8 of physical memory, at most 4 GiB.
try:
    _PHYSICAL = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
except (ValueError, OSError, AttributeError):
    _PHYSICAL = 8 << 30
DEFAULT_BUDGET_BYTES = min(4 << 30, _PHYSICAL // 8)


def _nbytes(value):
    if hasattr(value, "nbytes") and not isinstance(value, np.ndarray):
        return int(value.nbytes)  # a draws.Draw: its arrays' bytes
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return 0


def freeze(value):
    """Marks arrays read-only (in tuples/lists too), so a cached draw cannot be altered."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, (tuple, list)):
        for v in value:
            freeze(v)
    return value


def source_key(path):
    """SHA-256 (hex) of a reference file's bytes: the cache key's first half. Raises OSError."""
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


class DrawCache:
    """LRU of ``(source_key, seed) -> (nki_inputs, expected)`` bounded by array bytes.

    Thread-safe. A draw larger than the whole budget is returned but not
    kept. ``budget_bytes`` <= 0 disables caching.
    """

    def __init__(self, budget_bytes=DEFAULT_BUDGET_BYTES):
        self.budget_bytes = budget_bytes
        self._entries = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key, compute):
        """Returns the cached draw for ``key`` or ``compute()``'s result (then cached, frozen)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry[0]
            self.misses += 1
        value = freeze(compute())
        size = _nbytes(value)
        with self._lock:
            if 0 < self.budget_bytes and size <= self.budget_bytes and key not in self._entries:
                self._entries[key] = (value, size)
                self._bytes += size
                while self._bytes > self.budget_bytes:
                    _, (_, dropped) = self._entries.popitem(last=False)
                    self._bytes -= dropped
        return value

    def holds(self, key):
        """True when ``key`` is cached (no statistics counted, no recency changed)."""
        with self._lock:
            return key in self._entries

    def resize(self, key, size):
        """Sets the byte size of the entry ``key`` (a draw whose reference outputs were
        computed after it was cached); evicts the oldest entries beyond the budget."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            self._entries[key] = (entry[0], size)
            self._bytes += size - entry[1]
            while self._bytes > self.budget_bytes and self._entries:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def drop(self, key):
        """Forgets the entry ``key`` (if any); the draw itself lives on while referenced."""
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is not None:
                self._bytes -= entry[1]

    def clear(self):
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def stats(self):
        """{"entries", "bytes", "hits", "misses"}."""
        with self._lock:
            return {"entries": len(self._entries), "bytes": self._bytes, "hits": self.hits, "misses": self.misses}
