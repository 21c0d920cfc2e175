"""The traced programs of recent candidates, kept by the host (trusted side).

A search screens a candidate and later confirms it; a baseline is profiled in
several stages. Each of those calls would trace the same source again. The
program of a (source, argument specs, target) is kept here after its first
trace and sent to the passes of later calls directly. This is safe whatever the
candidate does: a program is data that the trusted replayer checks and executes
(docs/isolation.md, "Trusted evaluation"); a kernel whose trace is not
deterministic simply keeps its first program. Bounded by bytes, least recently
used first out; never written to disk.
"""
import collections
import hashlib
import json
import threading

# Bytes of programs kept (a full-size gqa_full program is about 53 MB).
BUDGET_BYTES = 256 << 20


class ProgramCache:
    """(source, argument specs, target) -> program bytes, LRU within ``budget`` bytes."""

    def __init__(self, budget=BUDGET_BYTES):
        self.budget = budget
        self._items = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def key(source, arg_spec, target):
        text = json.dumps([source, arg_spec, target], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def get(self, key):
        with self._lock:
            program = self._items.get(key)
            if program is not None:
                self._items.move_to_end(key)
            return program

    def put(self, key, program):
        if len(program) > self.budget:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            self._items[key] = program
            self._bytes += len(program)
            while self._bytes > self.budget:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= len(dropped)

    def clear(self):
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def __len__(self):
        with self._lock:
            return len(self._items)
