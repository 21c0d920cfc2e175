"""The untrusted half of the profiling harness: runs in a worker process.

:func:`run_kernel` loads the candidate from the source text it is sent (the
worker cannot read the kernel's file), runs it on each input set it is sent,
and returns the raw outputs, the digests of the inputs after each run,
aliasing findings and the cost model's latency of one designated run. It
never sees reference outputs and judges nothing: the host does
(:mod:`accelopt.sandbox.trusted`). On the emulator the input sets share
batched calls (:mod:`accelopt.batched_runs`; each set's results are those of
its own run); otherwise, or when batching is refused, they run one by one in
order.
"""
import errno
import hashlib
import resource
import sys
import time
import types

import numpy as np

from .. import batched_runs, loading
from .. import result as R
from ..backends import make_backend
from . import codec

SANDBOX_VIOLATION = "sandbox_violation"
OUT_OF_MEMORY = "out_of_memory"
CRASH = "crash"
FORBIDDEN_ACCESS = "forbidden_access"

_DENIED_ERRNOS = (errno.EPERM, errno.EACCES)


class KernelFailure(Exception):
    """A classified failure of the candidate: ``kind`` and ``message``, ``tb`` the traceback."""

    def __init__(self, kind, message, tb=""):
        super().__init__(message)
        self.kind, self.message, self.tb = kind, message, tb


def _program_error():
    from nki_emu.program.values import ProgramError
    return ProgramError


def classify(exc, kernel_path, default_kind, backend=None):
    """Maps an exception raised by candidate code to (kind, message).

    MemoryError -> out_of_memory; an OSError with EPERM/EACCES (what seccomp
    and Landlock answer) -> sandbox_violation; SystemExit -> crash; a program the
    replayer refuses (nki_emu.program.ProgramError) -> forbidden_access;
    NKICompileError -> compile_error; the backend's own kinds
    (``Backend.error_kind``: unwritten_output); anything else -> ``default_kind``. The
    message is led by the kernel's file:line where known.
    """
    if isinstance(exc, MemoryError):
        kind = OUT_OF_MEMORY
    elif isinstance(exc, OSError) and exc.errno in _DENIED_ERRNOS:
        kind = SANDBOX_VIOLATION
    elif isinstance(exc, SystemExit):
        kind = CRASH
    elif isinstance(exc, _program_error()):
        kind = FORBIDDEN_ACCESS  # only a tampered trace makes a program the replayer refuses
    elif backend is not None and backend.error_kind(exc):
        kind = backend.error_kind(exc)
    else:
        kind = default_kind
    where = loading.kernel_location(exc, kernel_path)
    text = R.exception_text(exc)  # cut before anything copies or searches it
    if where and where not in text:
        text = f"{where}: {text}"
    return kind, text


def load_kernel_source(source, path):
    """Executes kernel ``source`` (str) as a fresh module whose ``__file__`` is ``path``.

    Returns the ``kernel`` (else ``optimized_kernel``) callable and the module
    name (to drop from sys.modules afterwards). Raises KernelFailure.
    """
    name = "accelopt_candidate_" + hashlib.sha1(path.encode("utf-8")).hexdigest()[:16]
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module  # some decorators look their module up
    loading.remember_source(path, source)  # not whatever is on disk at `path`
    try:
        code = compile(source, path, "exec", dont_inherit=True)
        exec(code, module.__dict__)  # noqa: S102 - running the candidate is the point
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - classify every load failure
        sys.modules.pop(name, None)
        kind, message = classify(exc, path, R.COMPILE_ERROR)
        raise KernelFailure(kind, message, R.format_exception(exc)) from exc
    for attr in loading.KERNEL_ATTRIBUTES:
        fn = getattr(module, attr, None)
        if fn is not None:
            return fn, name
    sys.modules.pop(name, None)
    raise KernelFailure(R.COMPILE_ERROR, f"{path}: defines neither 'kernel' nor 'optimized_kernel'")


def _aliasing(outputs, inputs):
    """Returns "output i aliases input j" for the first output sharing memory with an input, else None."""
    for i, out in enumerate(outputs):
        if not isinstance(out, np.ndarray):
            continue
        for j, arg in enumerate(inputs):
            if isinstance(arg, np.ndarray) and np.may_share_memory(out, arg):
                return f"output {i} shares memory with input {j}"
    return None


def _as_tuple(value):
    if isinstance(value, tuple):
        return value
    if isinstance(value, list):
        return tuple(value)
    return (value,)


# The backend this worker was started for (worker_entry.startup); None outside a worker.
WORKER_BACKEND = None


def _prepared_backend(request):
    """The request's backend, prepared; raises KernelFailure(worker_error) when this worker cannot run it."""
    name = request.get("backend", "emulator")
    if WORKER_BACKEND is not None and name != WORKER_BACKEND:
        raise KernelFailure("worker_error", f"this worker runs the {WORKER_BACKEND} backend; the request "
                                            f"asked for {name}")
    try:
        backend = make_backend(name, request.get("target", "trn1"),
                               external_profiler=bool(request.get("external_profiler", False)))
        if request.get("timing_mode") in ("capture", "baremetal") and hasattr(backend, "timing_mode"):
            backend.timing_mode = request["timing_mode"]  # the host's (neuron.timing_mode)
        backend.prepare()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the environment's fault, not the candidate's
        raise KernelFailure("worker_error", f"the {name} backend cannot start: {type(exc).__name__}: {exc}",
                            R.format_exception(exc)) from exc
    return backend


def _record(outputs, args, seen, out_blobs, index):
    """The host's record of one run: encoded outputs (no copy), input digests, aliasing.

    ``args``: the arrays sent for the run; ``seen``: the arrays the kernel's arguments
    held (``args`` itself for a one-by-one run). An input the kernel held as the
    caller's own read-only array (a batched run's immutable argument) cannot have
    changed: its digest is None (the host then skips rule R3's comparison for it)."""
    outputs = _as_tuple(outputs)
    digests = []
    for sent, held in zip(args, seen):
        if held is sent and isinstance(sent, np.ndarray) and not sent.flags.writeable:
            digests.append(None)
        else:
            digests.append(codec.digest(held))
    record = {"aliasing": _aliasing(outputs, seen), "input_digests": digests}
    try:
        record["outputs"] = [codec.encode(o, out_blobs) for o in outputs]
    except codec.CodecError as exc:
        raise KernelFailure(R.SHAPE_MISMATCH, f"kernel output cannot be read (run {index}): {exc}") from exc
    return record


def _run_batched(request, backend, kernel, blobs, out, out_blobs, timings):
    """The runs in batched emulator calls; fills ``out``. Raises batched_runs.Fallback
    (run them one by one instead) or KernelFailure."""
    runs = request["runs"]
    timed = request.get("timed_run", -1)
    start = time.perf_counter()
    try:
        input_sets = [[codec.decode(value, blobs, copy=False) for value in encoded] for encoded in runs]
    except codec.CodecError as exc:
        raise KernelFailure(R.RUNTIME_ERROR, f"malformed inputs from the host: {exc}") from exc
    timings["decode_ms"] = (time.perf_counter() - start) * 1e3
    try:
        with np.errstate(all="ignore"):
            done = batched_runs.run(backend.emulator_module(), kernel, input_sets, timed, backend.target,
                                    max_batch=request.get("max_batch"))
    except batched_runs.UniformFailure as failure:
        exc = failure.error
        kind, message = classify(exc, request["kernel_path"], R.RUNTIME_ERROR, backend)
        raise KernelFailure(kind, f"{message} (run {request.get('first_run', 0)})", R.format_exception(exc)) from exc
    timings.update(run_ms=done.run_ms, trace_replay_ms=done.replay_ms, memory_cap_mb=done.cap_bytes / 2**20, passes=[
        {"runs": p["sets"], "traced": p["traced"], "ms": round(p["ms"], 3)} for p in done.passes])
    if done.member_bytes is not None:
        timings["member_mb"] = done.member_bytes / 2**20
    out["compiled"] = True
    start = time.perf_counter()
    for index, args in enumerate(input_sets):
        out["runs"].append(_record(done.outputs[index], args, done.arguments[index], out_blobs,
                                   index + request.get("first_run", 0)))
    if timed >= 0:
        try:
            out["latency_ms"], out["metrics"] = backend.timing_of(done.profile)
        except Exception as exc:  # noqa: BLE001 - reported as timing_error
            out["timing_error"] = f"timing failed: {type(exc).__name__}: {exc}"
    timings["encode_ms"] = (time.perf_counter() - start) * 1e3


def _run_one_by_one(request, backend, kernel, blobs, out, out_blobs, timings):
    """The runs in order, one backend call each (the neuron backend, or a refused
    batch); runs after a failing one are not executed. Fills ``out``."""
    kernel_path = request["kernel_path"]
    timed = request.get("timed_run", -1)
    first = request.get("first_run", 0)
    for index, encoded in enumerate(request["runs"]):
        try:
            args = [codec.decode(value, blobs) for value in encoded]  # fresh arrays for every run
        except codec.CodecError as exc:
            raise KernelFailure(R.RUNTIME_ERROR, f"malformed inputs from the host (run {first + index}): {exc}") from exc
        start = time.perf_counter()
        try:
            with np.errstate(all="ignore"):
                raw = backend.run(kernel, args, profiled=(index == timed))
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the candidate's failure
            kind, message = classify(exc, kernel_path, R.RUNTIME_ERROR, backend)
            raise KernelFailure(kind, f"{message} (run {first + index})", R.format_exception(exc)) from exc
        finally:
            timings["run_ms"] = timings.get("run_ms", 0.0) + (time.perf_counter() - start) * 1e3
        out["compiled"] = True
        out["runs"].append(_record(raw, args, args, out_blobs, first + index))
        if index == timed:
            start = time.perf_counter()
            try:
                if getattr(backend, "external_profiler", False):
                    # The host profiles these files (accelopt.backends.device_profile).
                    out["device_artifacts"] = backend.save_profile_runs(kernel, args)
                else:
                    latency, metrics = backend.measure(kernel, args)
                    out["latency_ms"], out["metrics"] = float(latency), metrics
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - reported as timing_error
                out["timing_error"] = f"timing failed: {type(exc).__name__}: {exc}"
            timings["trace_replay_ms"] = (time.perf_counter() - start) * 1e3


def _program_kernel(request, blobs):
    """The kernel a request's program describes (``request["program"]``: index of the
    blob holding it). Raises KernelFailure(forbidden_access) for a program that is not
    valid: only a tampered trace makes one."""
    from nki_emu import program
    index = request["program"]
    if not isinstance(index, int) or not 0 <= index < len(blobs):
        raise KernelFailure("worker_error", "the request names no program attachment")
    try:
        return program.kernel_from(bytes(blobs[index]))
    except program.ProgramError as exc:
        raise KernelFailure(FORBIDDEN_ACCESS, f"the kernel's program is not valid: {exc}") from exc


def _placeholder(spec):
    """A kernel argument for tracing from its spec (accelopt.sandbox.trusted.arg_spec): an
    array of zeros of the spec's dtype and shape, the literal otherwise."""
    if isinstance(spec, dict) and "array" in spec:
        dtype, shape = spec["array"]
        return np.zeros(tuple(int(d) for d in shape), dtype=np.dtype(dtype))
    if isinstance(spec, dict) and "seq" in spec:
        items = [_placeholder(v) for v in spec["seq"]]
        return items if spec.get("list") else tuple(items)
    return spec


@codec.packed
def trace_kernel(request, _blobs=()):
    """Traces a candidate into its program (nki_emu.program): the untrusted step.

    ``request``: ``kernel_source``, ``kernel_path``, ``target``, ``args`` (the
    kernel's argument specs: ``{"array": [dtype, shape]}``, ``{"seq": [...],
    "list": bool}`` or a JSON scalar). The kernel runs once on arrays of zeros:
    no input value is ever in this process. Returns ``({"program": 0 | None,
    "ops": int, "error": None | {"kind", "message", "traceback"}, "timings":
    {"load_ms", "trace_ms", "peak_rss_bytes"}}, [program JSON bytes])``.
    """
    from nki_emu import program
    out = {"program": None, "ops": 0, "error": None, "timings": {}}
    module_name = []
    path = request["kernel_path"]
    start = time.perf_counter()
    try:
        backend = _prepared_backend(request)
    except KernelFailure as failure:
        out["error"] = {"kind": failure.kind, "message": failure.message, "traceback": failure.tb}
        return out, []
    try:
        args = [_placeholder(spec) for spec in request["args"]]
    except (TypeError, ValueError, KeyError) as exc:
        out["error"] = {"kind": "worker_error", "message": f"malformed argument specs: {exc}", "traceback": ""}
        return out, []

    def load():
        kernel, name = load_kernel_source(request["kernel_source"], path)
        module_name.append(name)
        out["timings"]["load_ms"] = (time.perf_counter() - start) * 1e3
        return kernel

    try:
        with np.errstate(all="ignore"):
            recorded = program.record(load, args, path, request.get("target", "trn1"))
        data = program.dumps(recorded)
        out.update(program=0, ops=len(recorded["ops"]))
        return out, [data]
    except KernelFailure as failure:
        out["error"] = {"kind": failure.kind, "message": failure.message, "traceback": failure.tb}
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the candidate's failure, classified
        if isinstance(exc, program.ProgramError):
            text = str(exc) if exc.line is None else f"{path}:{exc.line}: {exc}"
            out["error"] = {"kind": R.RUNTIME_ERROR, "message": text, "traceback": R.format_exception(exc)}
            return out, []
        kind, message = classify(exc, path, R.RUNTIME_ERROR, backend)
        out["error"] = {"kind": kind, "message": message, "traceback": R.format_exception(exc)}
    finally:
        for name in module_name:
            sys.modules.pop(name, None)
        out["timings"]["trace_ms"] = (time.perf_counter() - start) * 1e3
        out["timings"]["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out, []


@codec.packed
def run_kernel(request, blobs):
    """Runs a candidate on the given input sets; returns what the host needs to judge it.

    Packed convention (codec): ``request``: ``kernel_source`` (str),
    ``kernel_path`` (str, for messages), ``backend`` ("emulator"|"neuron"),
    ``target``, ``external_profiler`` (bool: neuron only; leave the timed
    run's NEFF/NTFF files for the host instead of profiling here), ``runs``
    (list of lists of input descriptors into ``blobs``), ``timed_run``
    (index of the run whose cost is measured, or -1), ``batch`` (bool, default
    True: on the emulator, run the input sets in batched calls),
    ``max_batch`` (int, optional: most input sets per batched call), ``first_run`` (int,
    default 0: the number of the first run in messages; the host sends a candidate's
    input sets in several passes, accelopt.sandbox.passes).

    Returns ``(out, out_blobs)`` with out = ``{"compiled": bool, "runs": [{"outputs": [encoded...],
    "input_digests": [hex or None (unchanged: held read-only)...], "aliasing": str|None}...], "latency_ms",
    "metrics", "device_artifacts"? (external_profiler: [{"neff", "ntff"}] file
    names in the temp folder), "timing_error": str|None, "error": None|{"kind", "message",
    "traceback", "run": index}, "timings": {"load_ms",
    "decode_ms"?, "run_ms", "trace_replay_ms", "encode_ms"?, "batched": bool,
    "fallback"?: reason, "passes"?: [{"runs", "traced", "ms"}], "peak_rss_bytes"}}``;
    the outputs' bytes are in out_blobs (views of the kernel's outputs, no copy).
    Runs after a failing one are not executed (a failure every set shares is run 0's).
    """
    out = {"compiled": False, "runs": [], "latency_ms": None, "metrics": {}, "timing_error": None, "error": None}
    out_blobs = []
    timings = {"batched": False}
    out["timings"] = timings
    module_name = None
    try:
        backend = _prepared_backend(request)
        start = time.perf_counter()
        if "program" in request:  # trusted execution: the traced program, no candidate code
            kernel = _program_kernel(request, blobs)
        else:
            kernel, module_name = load_kernel_source(request["kernel_source"], request["kernel_path"])
        timings["load_ms"] = (time.perf_counter() - start) * 1e3
        batched = request.get("batch", True) and getattr(backend, "batches", False) and len(request["runs"]) > 0
        if batched:
            try:
                _run_batched(request, backend, kernel, blobs, out, out_blobs, timings)
                timings["batched"] = True
            except batched_runs.Fallback as fallback:
                timings["fallback"] = fallback.reason
                out.update(compiled=False, runs=[], latency_ms=None, metrics={}, timing_error=None)
                out_blobs.clear()
                batched = False
        if not batched:
            _run_one_by_one(request, backend, kernel, blobs, out, out_blobs, timings)
    except KernelFailure as failure:
        out["error"] = {"kind": failure.kind, "message": failure.message, "traceback": failure.tb,
                        "run": len(out["runs"])}
    finally:
        if module_name:
            sys.modules.pop(module_name, None)
        timings["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out, out_blobs
