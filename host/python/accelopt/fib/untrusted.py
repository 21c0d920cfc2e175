"""The untrusted half of a FIB evaluation: one trial of a solution (or of a
definition's reference) on CPU torch, in a worker's candidate process.

:func:`run_trial` writes the sources out as a package (as FIB's Python
builder does, so relative imports between files work), imports the entry
module, checks the entry's signature, calls it once on the trial's inputs
(the correctness call), then times it (warm-up, then timed iterations with a
cold cache before each, FIB's protocol on CPU), and returns the outputs of
the first call and of the last timed call, the input digests after the
calls, the per-iteration times and the captured stdout/stderr. Every
warm-up and timed call gets fresh inputs (:class:`FreshInputs`: the same
values at an address no earlier call saw) and, for DPS, fresh poisoned
outputs (:class:`FreshOutputs`), and a value-returning call that hands back
a tensor object an earlier call returned is refused: a result cached on
the inputs' addresses or returned from a cache cannot be timed. It never
sees a reference output and judges nothing: the host does
(:mod:`accelopt.fib.trusted`). The timer, the tensor methods it uses and
this module are captured at import, before any solution runs, and the
module is watched by the worker's integrity check (rule R5).
"""
import contextlib
import hashlib
import inspect
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import weakref

import torch

from ..sandbox import codec as np_codec
from . import names, tensors
from .inputs import digest as _input_digest

_perf_ns = time.perf_counter_ns
_Tensor = torch.Tensor
_TensorBase = getattr(torch._C, "TensorBase", None) or torch._C._TensorBase
_clone = _TensorBase.clone
_zero = _TensorBase.zero_
_copy = _TensorBase.copy_
_fill = _TensorBase.fill_
_as_strided = _TensorBase.as_strided
_numel = _TensorBase.numel
_element_size = _TensorBase.element_size
_is_floating = _TensorBase.is_floating_point
_empty = torch.empty
_no_grad = torch.no_grad
_bool = torch.bool

# Characters of captured stdout/stderr returned (the host caps the log again).
MAX_LOG = 48 * 1024
COMPILE_ERROR = "compile_error"
_FOLDERS = []  # written solution packages, removed when the trial ends
RUNTIME_ERROR = "runtime_error"


# Each call's copy of an input starts this many bytes after the previous call's.
_SHIFT_BYTES = 64


def _contiguous_strides(shape):
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(1, extent)
    return tuple(reversed(strides))


class _Arena:
    """Room for `calls` copies of one tensor, each `_SHIFT_BYTES` after the previous one (overlapping):
    call i's copy has an address no other call has, for the memory of one copy plus 64 bytes a call."""

    def __init__(self, shape, dtype, calls):
        self.shape = tuple(shape)
        self.strides = _contiguous_strides(self.shape)
        numel = 1
        for extent in self.shape:
            numel *= extent
        probe = _empty((), dtype=dtype)
        self.step = max(1, _SHIFT_BYTES // _element_size(probe))
        self.floating = _is_floating(probe)
        self.dtype = dtype
        self.storage = _empty(numel + self.step * max(1, calls), dtype=dtype)

    def view(self, i):
        return _as_strided(self.storage, self.shape, self.strides, self.step * i)


class FreshInputs:
    """The trial's inputs for warm-up and timed call ``i`` (:meth:`call`): each tensor copied, values
    unchanged, to an address that neither the original nor any other call has, so that a cache keyed
    on ``data_ptr()`` never hits; scalars pass as they are. The copies are made outside the timed region."""

    def __init__(self, inputs, calls):
        self._inputs = list(inputs)
        self._arenas = [_Arena(tuple(x.shape), x.dtype, calls) if type(x) is _Tensor else None  # noqa: E721
                        for x in self._inputs]

    def call(self, i):
        out = []
        for x, arena in zip(self._inputs, self._arenas):
            if arena is None:
                out.append(x)
            else:
                view = arena.view(i)
                _copy(view, x)
                out.append(view)
        return out


class FreshOutputs:
    """Destination-passing outputs for call ``i``: a new address each call, filled before it with NaN
    (floats), -1 (integers) or True, so that a call which writes nothing leaves no earlier call's result."""

    def __init__(self, specs, calls):
        self._arenas = []
        for spec in specs:
            shape = tuple(spec["shape"]) if spec["shape"] is not None else ()
            self._arenas.append(_Arena(shape, tensors.torch_dtype(spec["dtype"]), calls))

    def call(self, i):
        out = []
        for arena in self._arenas:
            view = arena.view(i)
            _fill(view, float("nan") if arena.floating else (True if arena.dtype == _bool else -1))
            out.append(view)
        return out


class _Returned:
    """Weak references to every tensor the calls of a trial returned: a call that returns a tensor
    object an earlier call returned (still alive, so held by a cache) is refused."""

    def __init__(self):
        self._seen = {}

    def check(self, value, call):
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if type(item) is not _Tensor:  # noqa: E721
                continue
            earlier = self._seen.get(id(item))
            if earlier is not None and earlier[0]() is item:
                raise _Failure(RUNTIME_ERROR, f"anti-cheat: {call} returned the same tensor object as {earlier[1]} "
                                              "(a cached result); every call must compute its outputs")
            self._seen[id(item)] = (weakref.ref(item), call)


class _Failure(Exception):
    def __init__(self, kind, message, tb=""):
        super().__init__(message)
        self.kind, self.message, self.tb = kind, message, tb


def _module_name(path):
    return path[:-3].replace("/", ".") if path.endswith(".py") else None


def _materialize(sources, package):
    """Writes ``sources`` under a fresh folder as package ``package``; returns the folder."""
    base = tempfile.mkdtemp(prefix="fib-")
    root = os.path.join(base, package)
    os.makedirs(root)
    folders = {root}
    for source in sources:
        path = os.path.normpath(os.path.join(root, source["path"]))
        if not path.startswith(root + os.sep):
            raise _Failure(COMPILE_ERROR, f"source path {source['path']!r} leaves the solution's folder")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        folder = os.path.dirname(path)
        while folder.startswith(root) and folder not in folders:
            folders.add(folder)
            folder = os.path.dirname(folder)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(source["content"])
    for folder in folders:
        init = os.path.join(folder, "__init__.py")
        if not os.path.exists(init):
            open(init, "w").close()
    return base


def _load(arg):
    """Imports the entry module and returns the entry function (raises _Failure(compile_error))."""
    sources = arg["sources"]
    entry_file, _, symbol = arg["entry"].partition("::")
    module = _module_name(entry_file)
    if not module or not symbol:
        raise _Failure(COMPILE_ERROR, f"entry point {arg['entry']!r} is not '<file>.py::<function>'")
    digest = hashlib.sha1(repr([(s["path"], s["content"]) for s in sources]).encode()).hexdigest()[:10]
    package = "fib_" + names.component(arg.get("role", "solution"), "role") + "_" + digest
    base = _materialize(sources, package)
    _FOLDERS.append(base)
    sys.path.insert(0, base)
    try:
        loaded = __import__(package + "." + module, fromlist=[symbol])
    except BaseException as exc:  # noqa: BLE001 - any import failure is a build error, as FIB's BuildError
        if isinstance(exc, (MemoryError, SystemExit)):
            raise
        raise _Failure(COMPILE_ERROR, f"cannot import {entry_file}: {type(exc).__name__}: {exc}",
                       traceback.format_exc()) from exc
    finally:
        sys.path.remove(base)
    function = getattr(loaded, symbol, None)
    if not callable(function):
        raise _Failure(COMPILE_ERROR, f"{entry_file} has no callable {symbol!r}")
    return function


def _positional_range(function):
    """(least, most) positional arguments ``function`` accepts; most None for *args; None if unknown."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    least, most = 0, 0
    for p in signature.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            most = None
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            if most is not None:
                most += 1
            if p.default is p.empty:
                least += 1
        elif p.kind == p.KEYWORD_ONLY and p.default is p.empty:
            return (least, -1)  # a required keyword-only parameter: no positional call fits
    return (least, most)


def _decide_dps(function, arg):
    """Whether to call DPS, from the spec or (spec silent, FIB's legacy trap) the signature."""
    n_in, n_out = arg["n_inputs"], len(arg["outputs"])
    dps = arg.get("dps")
    accepts = _positional_range(function)
    fits = (lambda n: accepts is None or (accepts[1] != -1 and accepts[0] <= n
                                          and (accepts[1] is None or n <= accepts[1])))
    if dps is None:  # no destination_passing_style key and the pipeline left it to the signature
        if fits(n_in + n_out) and not fits(n_in):
            dps = True
        elif fits(n_in):
            dps = False
        else:
            dps = bool(arg.get("dps_default", True))
    expected = n_in + n_out if dps else n_in
    if not fits(expected):
        raise _Failure(COMPILE_ERROR, f"{arg['entry']} must accept {expected} positional arguments "
                                      f"({'inputs then outputs (destination-passing)' if dps else 'the inputs'}); "
                                      f"its signature accepts {accepts[0]}.."
                                      f"{'*' if accepts[1] is None else accepts[1]}")
    return dps


def _encode_returned(value, blobs):
    try:
        return tensors.encode(value if isinstance(value, (list, tuple)) else value, blobs)
    except tensors.CodecError as exc:
        raise _Failure(RUNTIME_ERROR, f"the solution returned something that is not tensors or numbers: {exc}")


def _snapshot(value):
    """A private copy of the returned outputs (DPS outputs are overwritten by later calls)."""
    if isinstance(value, (list, tuple)):
        return [_snapshot(v) for v in value]
    if type(value) is _Tensor:  # noqa: E721
        return _clone(value)
    return value


@np_codec.packed
def run_trial(arg, blobs):
    """One trial; see the module docstring.

    ``arg``: {"role": "solution"|"reference", "sources": [{path, content}],
    "entry": "main.py::run", "dps": bool|None, "dps_default": bool,
    "n_inputs": int, "inputs": [encoded], "outputs": [{"name", "shape",
    "dtype"}], "seed": int, "timing": {"enabled", "warmup", "iterations",
    "flush_bytes"}}. ``blobs``: the inputs' bytes.

    Returns ``({"status": "ok"|"compile_error"|"runtime_error", "message",
    "traceback", "log", "dps", "returned", "after", "input_digests",
    "samples_ms", "median_ms"}, blobs)`` with the outputs' bytes.
    """
    reply = {"status": "ok", "message": "", "traceback": "", "log": ""}
    out_blobs = []
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            inputs = [tensors.decode(x, blobs) for x in arg["inputs"]]
            function = _load(arg)
            dps = _decide_dps(function, arg)
            reply["dps"] = dps
            torch.manual_seed(int(arg.get("seed", 0)))
            outputs = []
            if dps:
                for spec in arg["outputs"]:
                    shape = spec["shape"] if spec["shape"] is not None else ()
                    outputs.append(_empty(tuple(shape), dtype=tensors.torch_dtype(spec["dtype"])))
            returned = _Returned()

            def call(call_inputs, call_outputs):
                with _no_grad():
                    result = function(*call_inputs, *call_outputs)
                return call_outputs if dps else result

            try:
                raw_first = call(inputs, outputs)
                if not dps:
                    returned.check(raw_first, "the first call")
                first = _snapshot(raw_first)
                del raw_first
            except _Failure:
                raise
            except BaseException as exc:  # noqa: BLE001 - the solution's error, as FIB reports it
                if isinstance(exc, (MemoryError, SystemExit, KeyboardInterrupt)):
                    raise
                raise _Failure(RUNTIME_ERROR, f"{type(exc).__name__}: {exc}", traceback.format_exc()) from exc
            reply["returned"] = _encode_returned(first, out_blobs)
            timing = arg.get("timing") or {}
            if timing.get("enabled"):
                flush = None
                if int(timing.get("flush_bytes", 0)) > 0:
                    flush = _empty(int(timing["flush_bytes"]), dtype=torch.uint8)
                warmup, iterations = int(timing.get("warmup", 10)), int(timing.get("iterations", 50))
                # Fresh inputs (and poisoned DPS outputs) per call, made before the cache flush.
                fresh_in = FreshInputs(inputs, warmup + iterations)
                fresh_out = FreshOutputs(arg["outputs"], warmup + iterations) if dps else None
                samples = []
                last = None
                try:
                    for i in range(warmup + iterations):
                        call_inputs = fresh_in.call(i)
                        call_outputs = fresh_out.call(i) if dps else []
                        if flush is not None:
                            _zero(flush)
                        start = _perf_ns()
                        result = call(call_inputs, call_outputs)
                        elapsed = (_perf_ns() - start) / 1e6
                        if not dps:
                            returned.check(result, f"call {i + 1} after the first")
                        if i >= warmup:
                            samples.append(elapsed)
                            last = result
                        del result
                except _Failure:
                    raise
                except BaseException as exc:  # noqa: BLE001
                    if isinstance(exc, (MemoryError, SystemExit, KeyboardInterrupt)):
                        raise
                    raise _Failure(RUNTIME_ERROR, f"while timing: {type(exc).__name__}: {exc}",
                                   traceback.format_exc()) from exc
                reply["samples_ms"] = samples
                reply["median_ms"] = statistics.median(samples) if samples else None
                if last is not None:
                    reply["after"] = _encode_returned(last, out_blobs)
            reply["input_digests"] = [_digest(x) for x in inputs]
    except _Failure as failure:
        reply.update(status=failure.kind, message=failure.message, traceback=failure.tb)
        out_blobs = []
        reply.pop("returned", None)
        reply.pop("after", None)
    while _FOLDERS:
        shutil.rmtree(_FOLDERS.pop(), ignore_errors=True)
    log = captured.getvalue()
    if len(log) > MAX_LOG:
        log = log[:MAX_LOG] + f"\n[log truncated: {len(log) - MAX_LOG} more characters]"
    reply["log"] = log
    return reply, out_blobs


def _digest(value):
    if type(value) is not _Tensor:  # noqa: E721
        return ""
    return _input_digest(value)


def warm_up(_info=None):
    """A trusted trial (a tiny torch function) run once in the zygote: lazy imports and caches then
    live in every candidate process, and the prefault step learns the pages a trial writes."""
    blobs = []
    x = torch.ones((4, 8), dtype=torch.bfloat16)
    arg = {"role": "warmup", "entry": "main.py::run", "dps": False, "n_inputs": 1,
           "sources": [{"path": "main.py", "content": "import torch\n\ndef run(x):\n    return (x.float() * 2).to(x.dtype)\n"}],
           "inputs": [tensors.encode(x, blobs)], "outputs": [{"name": "y", "shape": [4, 8], "dtype": "bfloat16"}],
           "timing": {"enabled": True, "warmup": 1, "iterations": 2, "flush_bytes": 0}}
    reply, _ = run_trial(arg, [bytes(memoryview(b).cast("B")) for b in blobs])
    return reply["status"]
