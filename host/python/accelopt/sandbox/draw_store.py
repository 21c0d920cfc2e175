"""The published seeds' draws kept on disk between host processes (issue 14).

A published seed's input set and its reference outputs are a pure function of
the reference module's source, the seed and NumPy (``np.random.seed`` +
``get_inputs`` + ``forward``). Drawing them costs seconds for the full-size
problems (rope: about 2 s of ``np.random.normal`` per seed, adamw more), which
every cold ``accelopt-host profile`` paid for all five seeds. The trusted host
therefore writes each such draw once as ``.npy`` files and later maps them
read-only (``np.load(mmap_mode="r")``): page cache instead of private memory,
and no drawing. The hidden input set is never stored (docs/isolation.md, R1).

Layout: ``<root>/<source key[:40]>-np<NumPy version>/<seed>/{meta.json,
in<i>.npy, out<i>.npy}``, written into a temporary folder and renamed, so a
reader sees a whole entry or none. ``root``: ``$ACCELOPT_DRAW_STORE`` ("0" or
"" turns the store off), else ``$XDG_CACHE_HOME/accelopt/draws``, else
``~/.cache/accelopt/draws``. Entries beyond ``BUDGET_BYTES`` are removed, those
that save the least time per byte first (``cost_ms``: drawing plus the reference
forward, recorded in meta.json), the least recently used among equals: a run of
all fourteen problems once kept bmm's five 1 GiB outputs (0.5 s of forward each)
and dropped the inputs of rope, whose legacy ``np.random`` draw takes 2 s a seed
(docs/benchmarks/candidate-cost.txt). Only draws that took at least
``MIN_DRAW_MS`` are stored (smaller ones are faster drawn than read).
"""
import json
import os
import shutil
import tempfile
import threading

import numpy as np

ENV = "ACCELOPT_DRAW_STORE"
# Bytes the store may hold on disk.
BUDGET_BYTES = 8 << 30
# Draws faster than this (ms) are not stored.
MIN_DRAW_MS = 200.0
_LOCK = threading.Lock()


def root():
    """The store's folder (str), or None when it is turned off."""
    value = os.environ.get(ENV)
    if value is not None:
        return None if value in ("", "0") else value
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "accelopt", "draws")


def _entry(source_key, seed):
    folder = root()
    if folder is None:
        return None
    return os.path.join(folder, f"{source_key[:40]}-np{np.__version__}", str(int(seed)))


def _storable(values):
    return all(isinstance(v, np.ndarray) and v.dtype.kind in "biufc" and v.dtype.fields is None for v in values)


def load(source_key, seed):
    """(nki_inputs list, expected outputs as ``forward`` returned them) of a stored draw,
    arrays read-only and memory-mapped; None when absent, unreadable or the store is off."""
    entry = _entry(source_key, seed)
    if entry is None or not os.path.isdir(entry):
        return None
    try:
        with open(os.path.join(entry, "meta.json"), encoding="utf-8") as handle:
            meta = json.load(handle)
        inputs = [np.load(os.path.join(entry, f"in{i}.npy"), mmap_mode="r", allow_pickle=False).view(np.ndarray)
                  for i in range(int(meta["inputs"]))]
        outputs = [np.load(os.path.join(entry, f"out{i}.npy"), mmap_mode="r", allow_pickle=False).view(np.ndarray)
                   for i in range(int(meta["outputs"]))]
        os.utime(entry)  # least recently used goes first
    except (OSError, ValueError, KeyError, TypeError):
        return None
    kind = meta.get("returned")
    expected = tuple(outputs) if kind == "tuple" else list(outputs) if kind == "list" else outputs[0]
    return inputs, expected


def save(source_key, seed, nki_inputs, expected, cost_ms=0.0):
    """Stores a draw (arrays only; anything else is skipped). ``cost_ms``: what drawing it
    and its reference forward took (the time a later load saves; eviction order). Returns
    True when written. Never raises for an unwritable store (returns False)."""
    entry = _entry(source_key, seed)
    returned = "tuple" if isinstance(expected, tuple) else "list" if isinstance(expected, list) else "array"
    outputs = list(expected) if returned != "array" else [expected]
    if entry is None or not outputs or not _storable(nki_inputs) or not _storable(outputs):
        return False
    if os.path.isdir(entry):
        return True
    parent = os.path.dirname(entry)
    try:
        os.makedirs(parent, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix=".partial-", dir=parent)
        try:
            for prefix, values in (("in", nki_inputs), ("out", outputs)):
                for i, value in enumerate(values):
                    np.save(os.path.join(scratch, f"{prefix}{i}.npy"), np.ascontiguousarray(value), allow_pickle=False)
            with open(os.path.join(scratch, "meta.json"), "w", encoding="utf-8") as handle:
                json.dump({"inputs": len(nki_inputs), "outputs": len(outputs), "returned": returned,
                           "cost_ms": float(cost_ms)}, handle)
            os.rename(scratch, entry)
        except OSError:
            shutil.rmtree(scratch, ignore_errors=True)
            return os.path.isdir(entry)  # another process stored it first
    except OSError:
        return False
    _trim(root())
    return True


def _size(folder):
    total = 0
    for base, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(base, name))
            except OSError:
                pass
    return total


def _cost_ms(entry):
    try:
        with open(os.path.join(entry, "meta.json"), encoding="utf-8") as handle:
            value = json.load(handle).get("cost_ms", 0.0)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0
    except (OSError, ValueError, AttributeError):
        return 0.0


def _trim(folder, budget=None):
    """Removes entries until the store holds at most ``budget`` bytes: the least time saved
    per byte first (entries without a recorded cost count as saving nothing), then the least
    recently used."""
    budget = BUDGET_BYTES if budget is None else budget
    with _LOCK:
        entries = []
        try:
            for problem in os.listdir(folder):
                path = os.path.join(folder, problem)
                for seed in os.listdir(path) if os.path.isdir(path) else []:
                    if not seed.startswith("."):
                        entry = os.path.join(path, seed)
                        size = _size(entry)
                        entries.append((_cost_ms(entry) / max(size, 1), os.path.getmtime(entry), entry, size))
        except OSError:
            return
        total = sum(entry[3] for entry in entries)
        for _, _, entry, size in sorted(entries):
            if total <= budget:
                break
            shutil.rmtree(entry, ignore_errors=True)
            total -= size
