"""The untrusted half of the profiling harness: runs in a worker process.

:func:`run_kernel` loads the candidate from the source text it is sent (the
worker cannot read the kernel's file), runs it on each input set it is sent,
in order, and returns the raw outputs, the digests of the inputs after each
run, aliasing findings and the cost model's latency of one designated run. It
never sees reference outputs and judges nothing: the host does
(:mod:`accelopt.sandbox.trusted`).
"""
import errno
import hashlib
import sys
import types

import numpy as np

from .. import loading
from .. import result as R
from ..backends import make_backend
from . import codec

SANDBOX_VIOLATION = "sandbox_violation"
OUT_OF_MEMORY = "out_of_memory"
CRASH = "crash"

_DENIED_ERRNOS = (errno.EPERM, errno.EACCES)


class KernelFailure(Exception):
    """A classified failure of the candidate: ``kind`` and ``message``, ``tb`` the traceback."""

    def __init__(self, kind, message, tb=""):
        super().__init__(message)
        self.kind, self.message, self.tb = kind, message, tb


def classify(exc, kernel_path, default_kind, backend=None):
    """Maps an exception raised by candidate code to (kind, message).

    MemoryError -> out_of_memory; an OSError with EPERM/EACCES (what seccomp
    and Landlock answer) -> sandbox_violation; SystemExit -> crash;
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
        backend.prepare()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the environment's fault, not the candidate's
        raise KernelFailure("worker_error", f"the {name} backend cannot start: {type(exc).__name__}: {exc}",
                            R.format_exception(exc)) from exc
    return backend


@codec.packed
def run_kernel(request, blobs):
    """Runs a candidate on the given input sets; returns what the host needs to judge it.

    Packed convention (codec): ``request``: ``kernel_source`` (str),
    ``kernel_path`` (str, for messages), ``backend`` ("emulator"|"neuron"),
    ``target``, ``external_profiler`` (bool: neuron only; leave the timed
    run's NEFF/NTFF files for the host instead of profiling here), ``runs``
    (list of lists of input descriptors into ``blobs``), ``timed_run``
    (index of the run whose cost is measured, or -1).

    Returns ``(out, out_blobs)`` with out = ``{"compiled": bool, "runs": [{"outputs": [encoded...],
    "input_digests": [hex...], "aliasing": str|None}...], "latency_ms",
    "metrics", "device_artifacts"? (external_profiler: [{"neff", "ntff"}] file
    names in the temp folder), "timing_error": str|None, "error": None|{"kind", "message",
    "traceback", "run": index}}``; the outputs' bytes are in out_blobs. Runs
    after a failing one are not executed.
    """
    kernel_path = request["kernel_path"]
    out = {"compiled": False, "runs": [], "latency_ms": None, "metrics": {}, "timing_error": None, "error": None}
    out_blobs = []
    module_name = None
    try:
        backend = _prepared_backend(request)
        kernel, module_name = load_kernel_source(request["kernel_source"], kernel_path)
        timed = request.get("timed_run", -1)
        for index, encoded in enumerate(request["runs"]):
            try:
                args = [codec.decode(value, blobs) for value in encoded]  # fresh arrays for every run
            except codec.CodecError as exc:
                raise KernelFailure(R.RUNTIME_ERROR, f"malformed inputs from the host (run {index}): {exc}") from exc
            try:
                with np.errstate(all="ignore"):
                    raw = backend.run(kernel, args, profiled=(index == timed))
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - the candidate's failure
                kind, message = classify(exc, kernel_path, R.RUNTIME_ERROR, backend)
                raise KernelFailure(kind, f"{message} (run {index})", R.format_exception(exc)) from exc
            out["compiled"] = True
            outputs = _as_tuple(raw)
            record = {"aliasing": _aliasing(outputs, args),
                      "input_digests": [codec.digest(a) for a in args]}
            try:
                record["outputs"] = [codec.encode(o, out_blobs) for o in outputs]
            except codec.CodecError as exc:
                raise KernelFailure(R.SHAPE_MISMATCH, f"kernel output cannot be read (run {index}): {exc}") from exc
            out["runs"].append(record)
            if index == timed:
                try:
                    if getattr(backend, "external_profiler", False):
                        # The host profiles these files (accelopt.backends.device_profile).
                        out["device_artifacts"] = backend.save_profile_runs(kernel, args)
                    else:
                        latency, metrics = backend.measure(kernel, args)
                        out["latency_ms"], out["metrics"] = float(latency), metrics
                except (Exception, SystemExit) as exc:  # noqa: BLE001 - reported as timing_error
                    out["timing_error"] = f"timing failed: {type(exc).__name__}: {exc}"
    except KernelFailure as failure:
        out["error"] = {"kind": failure.kind, "message": failure.message, "traceback": failure.tb,
                        "run": len(out["runs"])}
    finally:
        if module_name:
            sys.modules.pop(module_name, None)
    return out, out_blobs
