"""Thread count of the BLAS that NumPy loaded (OpenBLAS), changed at run time.

Two users:

* The emulator: its matmuls are single tiles (at most 128x128 stationary by
  512 moving), where OpenBLAS threads cost more than they save: their
  hand-offs and spinning between calls made full-size kernels up to 1.7x
  slower (docs/benchmarks/emulator-speed.txt). :func:`single_threaded`
  wraps every emulated run; references keep all threads.
* The host: while a worker pool keeps every core busy, its own BLAS threads
  only spin against the workers, so it drops to one thread once a pool
  exists (host/src/worker/isolated_call.cc).

Only OpenBLAS exposes a run-time setter (``openblas_set_num_threads``); with
another BLAS every call is a no-op (getters return None).
"""
import contextlib
import ctypes
import re
import threading


_cached = []
_lock = threading.Lock()
_depth = 0
_saved = None


def _openblas():
    """The loaded OpenBLAS library (ctypes handle) or None; looked up once."""
    if not _cached:
        _cached.append(_find_openblas())
    return _cached[0]


def _find_openblas():
    import numpy  # noqa: F401 - BLAS is loaded with NumPy
    try:
        with open("/proc/self/maps", encoding="utf-8") as handle:
            maps = handle.read()
    except OSError:
        return None
    for path in sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", maps))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if hasattr(lib, "openblas_set_num_threads") and hasattr(lib, "openblas_get_num_threads"):
            return lib
    return None


def get_threads(_arg=None):
    """Current OpenBLAS thread count (int), or None without OpenBLAS."""
    lib = _openblas()
    return int(lib.openblas_get_num_threads()) if lib is not None else None


def set_threads(count):
    """Sets the OpenBLAS thread count to ``count`` (int >= 1); returns the previous count or None.

    Inside :func:`single_threaded` the count takes effect when the outermost
    context exits (and the previous count returned is the one it would have
    restored). Raises ValueError for a count below 1.
    """
    global _saved
    count = int(count)
    if count < 1:
        raise ValueError(f"BLAS thread count must be >= 1, got {count}")
    lib = _openblas()
    if lib is None:
        return None
    with _lock:
        if _depth > 0:
            previous, _saved = _saved, count
            return previous
        return _set(lib, count)


def _set(lib, count):
    previous = int(lib.openblas_get_num_threads())
    lib.openblas_set_num_threads(count)
    return previous


@contextlib.contextmanager
def single_threaded():
    """Runs the body with one OpenBLAS thread; nests and restores the count on exit.

    Process-wide: concurrent Python threads in the body also run single-threaded
    BLAS until the outermost context exits.
    """
    global _depth, _saved
    lib = _openblas()
    if lib is None:
        yield
        return
    with _lock:
        if _depth == 0:
            _saved = _set(lib, 1)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _set(lib, _saved)
                _saved = None
