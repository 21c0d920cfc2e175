"""Python side of a worker (the C++ side is host/src/worker/worker_main.cc).

The worker process is a zygote: it calls :func:`startup` once, after the
embedded interpreter is up and before the sandbox is sealed, and then forks
one fresh candidate process per request, which calls :func:`handle` once
under the per-request rlimits and the seccomp allow-list and exits. Nothing
a candidate changes survives it; the candidate process still checks, before
the reply leaves, that the call did not patch NumPy or the emulator
(identity) or edit the cost model in place (content digest), because the
candidate's own latency is computed in the same process. Both checks run in
C++ after :func:`handle` returns (host/src/worker/identity_check.h,
content_check.h) and call :func:`identity_changes` / :func:`digest_changes`
only when they find a difference.
"""
import importlib
import math
import os
import sys
import tempfile

from .. import evaluators
from .. import result as R
from . import integrity, sealed

_baseline = None
_digests = None
# True once the worker's C++ content check (host/src/worker/content_check.h)
# guards the digest: handle() then leaves it to the C++ side, which calls
# digest_changes() only when something differs. Only ever skips work here:
# the C++ check runs after handle() whatever this says.
_native_content_check = False
# Longest message or traceback a reply carries, in characters (a candidate's
# 256 MiB exception message must not travel, or grow the host).
MAX_TEXT = 64 * 1024


def startup(info):
    """Imports NumPy, the backend, its cost model and the harness; records the integrity baselines.

    ``info``: {"worker_id": int, "backend"?: "emulator" (default)|"neuron"}.
    Only the backend the worker serves is loaded: the emulator is installed
    as ``neuronxcc.nki``/``nki`` for "emulator" and never for "neuron", whose
    workers import the real SDK instead (docs/trainium.md). Returns
    {"numpy", "python", "backend", "sdk"?}. Raises RuntimeError when the
    neuron backend's SDK is not importable.
    """
    global _baseline, _digests
    import faulthandler
    stream = getattr(sys, "__stderr__", None)
    if stream is not None:
        try:
            faulthandler.enable(file=stream)  # a Python traceback on SIGSEGV/SIGABRT, in the host's log
        except (ValueError, OSError, AttributeError):
            pass
    import numpy  # noqa: F401 - the point is to import it once, now
    from . import untrusted
    from .. import profile  # noqa: F401
    backend = (info or {}).get("backend", "emulator")
    versions = {"numpy": numpy.__version__, "python": sys.version.split()[0], "backend": backend}
    if backend == "neuron":
        versions["sdk"] = _start_neuron()
    elif backend == "emulator":
        _start_emulator()
    elif backend == "torch":
        versions["torch"] = _start_torch()
    else:
        raise RuntimeError(f"unknown worker backend {backend!r}")
    untrusted.WORKER_BACKEND = backend
    # Imported now, not when the worker asks it for the sandbox's paths after
    # the identity baseline is taken: a module imported later adds a name to
    # its package, and every candidate's identity check would then differ.
    from . import hardware_profile  # noqa: F401
    _baseline = integrity.snapshot()
    _digests = integrity.content_digests()
    import gc
    gc.collect()
    gc.freeze()  # candidate processes' collections never touch (copy) the zygote's objects
    return versions


def _start_emulator():
    import nki_emu
    from ..backends import emulator  # noqa: F401
    nki_emu.install()
    from nki_emu import blas_threads
    blas_threads.get_threads()  # finds the BLAS library now, while /proc is still readable
    import neuronxcc.nki.isa  # noqa: F401 - aliases now resolve
    import neuronxcc.nki.language  # noqa: F401
    import neuronxcc.nki.typing  # noqa: F401
    for name in ("targets", "formulas", "metrics", "residency", "scheduler", "tracer"):
        importlib.import_module("nki_emu.cost." + name)
    for name in ("recorder", "replay", "values"):  # tracing (untrusted) and replaying (trusted) programs
        importlib.import_module("nki_emu.program." + name)
    warm_up(None)  # lazy imports and caches, once, in the zygote


def _start_torch():
    """FlashInfer-Bench's CPU tier (docs/flashinfer.md): imports torch (one thread, as the
    worker's OMP_NUM_THREADS says) and the trial harness once, in the zygote."""
    import torch
    torch.set_num_threads(1)
    evaluators.warm_up("torch")  # lazy imports and torch's first-call caches, once, in the zygote
    return torch.__version__


def _start_neuron():
    """Imports the real SDK's NKI once, in the zygote; returns backends.sdk's description of it."""
    from ..backends import neuron  # noqa: F401
    from ..backends.sdk import sdk_info
    info = sdk_info()
    if not info["available"]:
        raise RuntimeError("neuron worker: " + info["reason"].split(";")[0])
    os.environ.update(neuron.NEURON_ENV)
    importlib.import_module(info["namespace"])
    for sub in ("language", "isa"):
        try:
            importlib.import_module(info["namespace"] + "." + sub)
        except ImportError:
            pass
    integrity.unwatch_sdk()
    return {k: info[k] for k in ("namespace", "version", "location")}


# A trusted kernel the worker runs once at startup (lazy imports and the
# emulator's caches are then in the state every candidate process inherits),
# and, with ACCELOPT_SPARE_WARM_UP=1, every spare candidate process runs
# while it waits for its request (faulting in the copy-on-write pages a run
# writes, off the critical path).
_WARM_UP_SOURCE = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x[0:M, 0:N])
    nl.store(out[0:M, 0:N], value=nl.multiply(tile, 2.0))
    return out
"""


WARM_UP_SETS = 6


def warm_up(info):
    """Runs the built-in warm-up kernel (128x64 float32) on WARM_UP_SETS input sets, one timed.

    Called by :func:`startup` in the worker and in every spare candidate
    process before its request (host/src/worker/worker_main.cc). ``info`` is
    ignored. Returns the warm-up kernel's error kind or None; never raises.
    """
    import numpy as np
    from . import codec, untrusted
    if untrusted.WORKER_BACKEND == "torch":
        try:
            return None if all(r == "ok" for r in evaluators.warm_up("torch")) else "warm_up_failed"
        except Exception as exc:  # noqa: BLE001 - a warm-up problem only costs speed
            return type(exc).__name__
    if untrusted.WORKER_BACKEND not in (None, "emulator"):
        return None  # a hardware run would compile for seconds: no warm-up
    try:
        blobs = []
        # As many input sets as a profiled candidate sends (5 seeds + 1 hidden
        # set), so the warm-up takes the same (batched) path and the pages the
        # worker learns from it (host/src/worker/prefault.h) are a candidate's.
        runs = [[codec.encode(np.full((128, 64), i, np.float32), blobs)] for i in range(WARM_UP_SETS)]
        # A candidate's two steps: traced (untrusted), then its program run (trusted; issue 34).
        traced, program = untrusted.trace_kernel({"kernel_source": _WARM_UP_SOURCE, "kernel_path": "<accelopt-warm-up>",
                                                  "args": [{"array": ["<f4", [128, 64]]}]})
        if traced.get("error"):
            return traced["error"].get("kind")
        out, _ = untrusted.run_kernel({"program": len(blobs), "kernel_path": "<accelopt-warm-up>",
                                       "runs": runs, "timed_run": WARM_UP_SETS - 1},
                                      [bytes(b) for b in blobs] + [bytes(program[0])])
        if _digests is not None and not _native_content_check:
            integrity.compare_digests(_digests)
        return (out.get("error") or {}).get("kind")
    except Exception as exc:  # noqa: BLE001 - a warm-up problem only costs speed
        return type(exc).__name__


def use_native_content_check(on):
    """Called by the worker after it recorded the content watch (``on``: bool); returns None."""
    global _native_content_check
    _native_content_check = bool(on)
    import gc
    gc.freeze()  # the watch's records (made after startup's freeze) are never collected in a candidate either


def digest_changes(info):
    """The cost model's in-place edits since startup (list of str; integrity.compare_digests)."""
    return integrity.compare_digests(_digests) if _digests is not None else []


def identity_changes(info):
    """Rule R5's report: what the call changed in the watched modules since startup (list of str)."""
    return integrity.compare(_baseline) if _baseline is not None else []


def _cut(text):
    if isinstance(text, str) and len(text) > MAX_TEXT:
        return text[:MAX_TEXT] + f"... [{len(text) - MAX_TEXT} more characters cut]"
    return text


def _cut_error(error):
    if isinstance(error, dict):
        for key in ("message", "traceback"):
            if key in error:
                error[key] = _cut(error[key])


def _finite(value):
    """``value`` with non-finite floats replaced by None.

    The host's JSON bridge maps NaN/Infinity tokens to null by text
    substitution, which would also rewrite strings (messages, tracebacks)
    that contain "NaN" or "Infinity".
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def handle(message, blobs):
    """Runs one request in this (fresh, sandboxed) candidate process.

    ``message``: ``{"module", "function", "arg", "packed", "scratch",
    "limits"}`` (limits are already applied by the C++ side); ``blobs``: the
    request's attachments (list of bytes; read-only memoryviews of the sealed
    input memfds when ``message["shared"]`` = {"memfds": [fd, ...], "blobs":
    [[k, offset, nbytes], ...]} names them, accelopt.sandbox.sealed). With ``"packed": true`` the
    function is called as ``function(arg, blobs)`` and must be marked
    :func:`codec.packed`; otherwise as ``function(arg)``.

    Returns ``(reply, reply_blobs)``; reply is ``{"ok": True, "result": ...}``
    or ``{"ok": False, "error": {"kind", "message", "traceback"}}``, plus
    ``"integrity"``: the changes to NumPy, builtins, the emulator or the
    harness the call left (identity, rule R5) and in-place edits of the cost
    model (content digest). Error kinds: out_of_memory (MemoryError),
    sandbox_violation (PermissionError from seccomp/Landlock), crash
    (SystemExit), python_error (anything else). Messages and tracebacks are
    cut to MAX_TEXT characters.
    """
    scratch = message.get("scratch")
    reply = {"ok": False, "integrity": []}
    reply_blobs = []
    try:
        if scratch:
            os.environ["TMPDIR"] = scratch
            tempfile.tempdir = scratch
        shared = message.get("shared")
        if shared:  # the attachments are ranges of sealed memfds the worker passed on (sealed.py)
            blobs = sealed.map_ranges(shared.get("memfds") or [], shared.get("blobs") or [])
        function = getattr(importlib.import_module(message["module"]), message["function"])
        if message.get("packed"):
            if not getattr(function, "packed", False):
                raise TypeError(f"{message['module']}.{message['function']} does not take attachments")
            reply["result"], reply_blobs = function(message.get("arg"), blobs)
        else:
            reply["result"] = function(message.get("arg"))
        reply["ok"] = True
    except MemoryError as exc:
        reply["error"] = {"kind": "out_of_memory", "message": f"MemoryError: {exc}", "traceback": ""}
    except OSError as exc:
        kind = "sandbox_violation" if exc.errno in (1, 13) else "python_error"
        reply["error"] = {"kind": kind, "message": R.exception_text(exc),
                          "traceback": R.format_exception(exc)}
    except SystemExit as exc:
        reply["error"] = {"kind": "crash", "message": f"SystemExit({exc.code!r})", "traceback": ""}
    except BaseException as exc:  # noqa: BLE001 - report everything
        reply["error"] = {"kind": "python_error", "message": R.exception_text(exc),
                          "traceback": R.format_exception(exc)}
    _cut_error(reply.get("error"))
    result = reply.get("result")
    if isinstance(result, dict):
        _cut_error(result.get("error"))
        if isinstance(result.get("timing_error"), str):
            result["timing_error"] = _cut(result["timing_error"])
    if "result" in reply:
        reply["result"] = _finite(reply["result"])
    # The identity check (rule R5) runs after this returns, in C++ without
    # touching objects (host/src/worker/identity_check.h), and calls
    # identity_changes() for the details when it finds a difference; so does
    # the content check (content_check.h, digest_changes()) once the worker
    # turned it on.
    use_digest = _digests is not None and not _native_content_check
    reply["integrity"] = integrity.compare_digests(_digests) if use_digest else []
    if not reply["ok"]:
        reply_blobs = []
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a candidate may have replaced or closed them
            pass
    return reply, reply_blobs
