"""The untrusted half of a FIB evaluation: one trial of a solution (or of a
definition's reference) on CPU torch, in a worker's candidate process.

:func:`run_trial` writes the sources out as a package (as FIB's Python
builder does, so relative imports between files work), imports the entry
module, checks the entry's signature, calls it once on the trial's inputs
(the correctness call), then times it (warm-up, then timed iterations with a
cold cache before each, FIB's protocol on CPU), and returns the outputs of
the first call and of the last timed call, the input digests after the
calls, the per-iteration times and the captured stdout/stderr. It never
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

import torch

from ..sandbox import codec as np_codec
from . import tensors
from .inputs import digest as _input_digest

_perf_ns = time.perf_counter_ns
_Tensor = torch.Tensor
_TensorBase = getattr(torch._C, "TensorBase", None) or torch._C._TensorBase
_clone = _TensorBase.clone
_zero = _TensorBase.zero_
_empty = torch.empty
_no_grad = torch.no_grad

# Characters of captured stdout/stderr returned (the host caps the log again).
MAX_LOG = 48 * 1024
COMPILE_ERROR = "compile_error"
_FOLDERS = []  # written solution packages, removed when the trial ends
RUNTIME_ERROR = "runtime_error"


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
    package = "fib_" + arg.get("role", "solution") + "_" + digest
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
            call_args = inputs + outputs

            def call():
                with _no_grad():
                    result = function(*call_args)
                return outputs if dps else result

            try:
                first = _snapshot(call())
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
                samples = []
                last = None
                try:
                    for _ in range(int(timing.get("warmup", 10))):
                        if flush is not None:
                            _zero(flush)
                        call()
                    for _ in range(int(timing.get("iterations", 50))):
                        if flush is not None:
                            _zero(flush)
                        start = _perf_ns()
                        last = call()
                        samples.append((_perf_ns() - start) / 1e6)
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
