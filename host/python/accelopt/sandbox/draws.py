"""Input sets and their reference outputs on the trusted side (docs/isolation.md, rule R1).

A :class:`Draw` is one input set of a reference module: its inputs are drawn
at once (the worker needs them), its reference outputs are computed on a
background thread while the kernel runs in a worker, and what the judge needs
from it (outputs, their L2 norms, input digests) is computed once and kept.
The published seeds' draws are cached (``draw_cache``); the hidden input set
of every call is fresh, drawn from a secret seed, and, when the same
reference is profiled again and again (a search), the next call's hidden set
is drawn and its reference computed ahead, on the background thread
(:class:`HiddenSpares`): each spare serves exactly one call. A caller may
allow one hidden set to serve up to N calls of the same reference (a
search's screens, ``hidden_reuse``; docs/isolation.md): it then stays in the
host's memory only, within a byte budget, and is never written anywhere.
"""
import collections
import concurrent.futures
import functools
import secrets
import threading
import time
import weakref

import numpy as np

from .. import compare, profile
from . import codec, draw_cache, draw_store, sealed
from .hidden_rng import fast_global_rng

# np.random.seed + get_inputs must not interleave between host threads.
RNG_LOCK = threading.Lock()
# One thread: reference outputs are computed one at a time, next to the workers.
_EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="accelopt-reference")
_BLAS_LIMITED = []


def _limit_host_blas():
    """One OpenBLAS thread in the host from the first background reference on: it runs
    while workers hold the cores (docs/isolation.md, "BLAS threads"; `accelopt-host
    profile` starts its one worker without the pool's own limit)."""
    if not _BLAS_LIMITED:
        _BLAS_LIMITED.append(True)
        try:
            from nki_emu import blas_threads
            blas_threads.set_threads(1)
        except Exception:  # noqa: BLE001 - without OpenBLAS or the emulator: nothing to limit
            pass


def _nbytes(values):
    return sum(v.nbytes for v in values if isinstance(v, np.ndarray))


class Draw:
    """One input set: ``seed``, ``nki_inputs`` (list, read-only arrays), the reference
    outputs (:meth:`expected`, computed in the background by :meth:`start`).

    Thread-safe. ``draw_ms``: time spent drawing the inputs; ``reference_ms``: time the
    reference's forward took (None until done).
    """

    def __init__(self, seed, inputs, nki_inputs, draw_ms):
        self.seed, self.draw_ms, self.reference_ms = seed, draw_ms, None
        self.nki_inputs = list(nki_inputs)
        draw_cache.freeze(self.nki_inputs)
        self._inputs = inputs
        self._future = None
        self._lock = threading.Lock()
        self._digests = {}
        self._norms = None
        self.store_key = None  # (source key, seed): write to draw_store once the outputs are computed
        self.from_store = False  # loaded from draw_store
        # A hidden set that serves several screens keeps its inputs' sealed memfd for them
        # (accelopt.sandbox.sealed; trusted._shared_job); counted in nbytes.
        self.sealed_inputs = None

    @classmethod
    def stored(cls, seed, nki_inputs, expected, load_ms):
        """A Draw whose reference outputs are known already (draw_store): nothing to start."""
        drawn = cls(seed, None, nki_inputs, load_ms)
        future = concurrent.futures.Future()
        future.set_result(draw_cache.freeze(expected))
        drawn._future, drawn.reference_ms, drawn.from_store = future, 0.0, True
        return drawn

    def kept_on_disk(self):
        """True when this draw is in the disk store (draw_store) or will be written to it once
        its reference outputs are computed: worth storing when drawing and forward took at
        least draw_store.MIN_DRAW_MS (the forward's time counts once known)."""
        if self.from_store:
            return True
        return (self.store_key is not None and draw_store.root() is not None
                and self.draw_ms + (self.reference_ms or 0.0) >= draw_store.MIN_DRAW_MS)

    def sealed(self, blobs):
        """This set's inputs in one sealed memfd (accelopt.sandbox.sealed.SealedBuffers of
        ``blobs``, its encoded attachments), made by the first caller and shared by every later
        one, from any thread. Raises OSError as SealedBuffers does."""
        with self._lock:
            if self.sealed_inputs is None:
                self.sealed_inputs = sealed.SealedBuffers(blobs)
            return self.sealed_inputs

    @property
    def nbytes(self):
        """Bytes of the arrays held: inputs, plus the reference outputs once computed, plus the
        inputs' sealed memfd if one is kept."""
        done = self._future is not None and self._future.done() and self._future.exception() is None
        shared = self.sealed_inputs.nbytes if self.sealed_inputs is not None else 0
        return _nbytes(self.nki_inputs) + shared + (_nbytes(compare.as_tuple(self._future.result())) if done else 0)

    def start(self, reference, on_done=None):
        """Computes the reference outputs on the background thread (once); ``on_done``
        (callable, optional) runs after they are computed (the Draw is then done: its
        ``nbytes`` count them)."""
        _limit_host_blas()
        with self._lock:
            if self._future is None:
                self._future = _EXECUTOR.submit(self._forward, reference)
                # Callbacks hold the Draw weakly: a strong one would make a cycle (Draw ->
                # future -> callback -> Draw) that keeps its arrays until the next GC.
                if self.store_key is not None:
                    # Written on the references' thread once the judge can read the outputs:
                    # one draw at a time, no queue of arrays waiting for the disk.
                    self._future.add_done_callback(functools.partial(_after, weakref.ref(self), Draw._store))
                if on_done is not None:
                    self._future.add_done_callback(functools.partial(_after, weakref.ref(self), on_done))
        return self

    def _store(self):
        if self._future.exception() is None and self.kept_on_disk():
            self.from_store = draw_store.save(*self.store_key, self.nki_inputs, self._future.result(),
                                              cost_ms=self.draw_ms + (self.reference_ms or 0.0))
        self.store_key = None

    def _forward(self, reference):
        start = time.perf_counter()
        try:
            with np.errstate(all="ignore"):  # exp overflow to inf is legitimate (swiglu)
                expected = profile._reference_call("forward()", reference.forward, *self._inputs)
            compare.check_reference_outputs(compare.as_tuple(expected))
            draw_cache.freeze(expected)
            return expected
        finally:
            self.reference_ms = (time.perf_counter() - start) * 1e3
            self._inputs = None  # forward's own inputs are no longer needed

    def done(self):
        """True when the reference outputs are computed (and did not fail)."""
        future = self._future
        return future is not None and future.done() and future.exception() is None

    def expected(self, reference=None):
        """The reference outputs (waits for the background computation; starts it with
        ``reference`` if nobody did). Raises HarnessError(reference_error)."""
        if self._future is None:
            self.start(reference)
        return self._future.result()

    def norms(self):
        """L2 norm (float64) of each reference output: compare.compare_outputs's ``ref_norms``."""
        if self._norms is None:
            self._norms = compare.reference_norms(compare.as_tuple(self.expected()))
        return self._norms

    def digest(self, index):
        """SHA-256 digest of input ``index`` (codec.digest; computed once)."""
        with self._lock:
            if index not in self._digests:
                self._digests[index] = codec.digest(self.nki_inputs[index])
            return self._digests[index]


def _after(ref, function, _future):
    """A Draw's done-callback: ``function(draw)`` if the Draw still exists."""
    drawn = ref()
    if drawn is not None:
        function(drawn)


def settle():
    """Waits until every reference output and hidden set queued so far is computed (the
    background thread runs them in order). Benchmarks call it to keep that work out of a
    timed region."""
    _EXECUTOR.submit(lambda: None).result()


def draw(reference, seed, hidden=False):
    """A Draw of ``reference`` for ``seed``, its reference outputs not yet started.
    ``hidden``: a hidden set (any stream of the reference's distributions will do: drawn
    through hidden_rng's fast Generator) rather than a published seed (NumPy's legacy
    stream, as AccelOpt draws it). Raises HarnessError(reference_error) when get_inputs
    or transform_to_nki_inputs fail."""
    start = time.perf_counter()
    with RNG_LOCK:
        if hidden:
            with fast_global_rng(seed):
                inputs = profile._reference_call("get_inputs()", reference.get_inputs)
        else:
            np.random.seed(seed)
            inputs = profile._reference_call("get_inputs()", reference.get_inputs)
    nki_inputs = profile._reference_call("transform_to_nki_inputs()", reference.transform_to_nki_inputs, inputs)
    return Draw(seed, inputs, nki_inputs, (time.perf_counter() - start) * 1e3)


def published(reference, seed, source_key):
    """The Draw of a published seed: from the disk store (draw_store) when it holds it,
    its outputs known; else drawn now (:func:`draw`) and stored once its reference
    outputs are computed. Raises HarnessError(reference_error) like :func:`draw`."""
    start = time.perf_counter()
    found = draw_store.load(source_key, seed)
    if found is not None:
        return Draw.stored(seed, found[0], found[1], (time.perf_counter() - start) * 1e3)
    drawn = draw(reference, seed)
    drawn.store_key = (source_key, seed)
    return drawn


def settle_store(_call=None):
    """Waits until the draws whose outputs are computed are written to the disk store
    (tests, benchmarks, and `accelopt-host profile` before it exits): they are written on
    the references' thread. ``_call`` is ignored (the host's CallJson passes null)."""
    settle()


def secret_seed(excluded):
    """A fresh secret seed in [0, 2^32) not in ``excluded``."""
    while True:
        seed = secrets.randbelow(2**32)
        if seed not in excluded:
            return seed


# Bytes of hidden sets kept for reuse (inputs and reference outputs): 1/16 of physical memory, at most 2 GiB.
REUSE_BUDGET_BYTES = min(draw_cache.DEFAULT_BUDGET_BYTES // 2, 2 << 30)
MAX_REUSE = 64  # calls one hidden set may serve at most


class HiddenSpares:
    """Hidden input sets drawn ahead for references profiled repeatedly, and kept for
    reuse where the caller allows it.

    :meth:`take` returns a hidden Draw for a reference: with ``uses`` > 1 the set kept
    for that reference if it has served fewer than its ``uses`` calls, else a spare
    drawn ahead if one is there, else a new one drawn now. When the same reference was
    profiled recently (``repeat_window`` calls) and no kept set serves the next call,
    the next call's spare is drawn on the background thread. Spares are kept for at
    most ``keys`` references, each used once; sets kept for reuse are bounded by
    ``reuse_budget`` bytes (least recently used dropped first; a larger set is not kept).
    """

    def __init__(self, keys=2, repeat_window=3, reuse_budget=REUSE_BUDGET_BYTES):
        self.keys, self.repeat_window, self.reuse_budget = keys, repeat_window, reuse_budget
        self._spares = collections.OrderedDict()  # reference key -> Future of a started Draw
        self._kept = collections.OrderedDict()  # reference key -> [Draw, calls left]
        self._recent = collections.deque(maxlen=repeat_window)
        self._lock = threading.Lock()
        self.served = self.drawn = self.reused = 0

    def take(self, reference, key, excluded, uses=1):
        """(a hidden Draw, how it came: "drawn", "spare" or "reused"). ``uses``: calls of this
        reference the set may serve in all (1: this call only, the default; at most
        MAX_REUSE). A spare's or a kept set's reference outputs are computed already (or
        being computed); a Draw drawn now has them not started yet."""
        uses = max(1, min(int(uses), MAX_REUSE))
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and (uses <= 1 or kept[1] <= 0 or kept[0].seed in excluded):
                del self._kept[key]
                kept = None
            if kept is not None:
                kept[1] -= 1
                self._kept.move_to_end(key)
                self._recent.append(key)
                self.reused += 1
                return kept[0], "reused"
            spare = self._spares.pop(key, None)
            repeat = key in self._recent
            self._recent.append(key)
        hidden, was_spare = None, False
        if spare is not None:
            try:
                hidden = spare.result()
            except Exception:  # noqa: BLE001 - a failed spare: draw now, which reports the error
                hidden = None
            if hidden is not None and hidden.seed in excluded:
                hidden = None
        if hidden is None:
            hidden = draw(reference, secret_seed(excluded), hidden=True)  # its reference starts with its pass
            self.drawn += 1
        else:
            was_spare = True
            self.served += 1
        if uses > 1:
            self._keep(key, hidden, uses - 1)
        elif repeat:
            self._prepare_spare(reference, key, excluded)
        return hidden, "spare" if was_spare else "drawn"

    def _keep(self, key, hidden, calls):
        """Keeps ``hidden`` for ``calls`` more calls of ``key``, within the byte budget."""
        with self._lock:
            self._kept[key] = [hidden, calls]
            self._kept.move_to_end(key)
            while self._kept and sum(d.nbytes for d, _ in self._kept.values()) > self.reuse_budget:
                self._kept.popitem(last=False)  # the oldest first; a set above the budget goes at once

    def _prepare_spare(self, reference, key, excluded):
        future = _EXECUTOR.submit(lambda: draw(reference, secret_seed(excluded), hidden=True).start(reference))
        with self._lock:
            self._spares[key] = future
            self._spares.move_to_end(key)
            while len(self._spares) > self.keys:
                self._spares.popitem(last=False)

    def clear(self):
        """Drops every spare (tests)."""
        with self._lock:
            self._spares.clear()
            self._kept.clear()
            self._recent.clear()
