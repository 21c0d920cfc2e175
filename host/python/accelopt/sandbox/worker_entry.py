"""Body of the worker's request loop (the C++ side is host/src/worker/worker_main.cc).

The worker calls :func:`startup` once, after the embedded interpreter is up
and before the sandbox is sealed, then :func:`handle` for every request. Each
request runs in its own scratch directory (cwd and temp dir) under per-request
rlimits; afterwards the worker checks its own integrity and asks to be
restarted when a candidate changed NumPy or the backend or ran out of memory.
"""
import importlib
import math
import os
import resource
import sys
import tempfile

from .. import result as R
from . import integrity

_baseline = None


def startup(info):
    """Imports NumPy, the emulator and the harness, and records the integrity baseline.

    ``info``: {"worker_id": int}. Returns {"numpy": version, "python": version}.
    """
    global _baseline
    import faulthandler
    stream = getattr(sys, "__stderr__", None)
    if stream is not None:
        try:
            faulthandler.enable(file=stream)  # a Python traceback on SIGSEGV/SIGABRT, in the host's log
        except (ValueError, OSError, AttributeError):
            pass
    import numpy  # noqa: F401 - the point is to import it once, now
    import nki_emu
    from . import untrusted  # noqa: F401
    from .. import profile  # noqa: F401
    from ..backends import emulator  # noqa: F401
    nki_emu.install()
    from nki_emu import blas_threads
    blas_threads.get_threads()  # finds the BLAS library now, while /proc is still readable
    import neuronxcc.nki.isa  # noqa: F401 - aliases now resolve
    import neuronxcc.nki.language  # noqa: F401
    import neuronxcc.nki.typing  # noqa: F401
    _baseline = integrity.snapshot()
    return {"numpy": numpy.__version__, "python": sys.version.split()[0]}


def _set_limit(which, soft):
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(which, (soft, hard))


def _reset_limit(which):
    _, hard = resource.getrlimit(which)
    resource.setrlimit(which, (hard, hard))


def _clear(directory):
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            _clear(entry.path)
            os.rmdir(entry.path)
        else:
            os.unlink(entry.path)


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
    """Runs one request: ``{"module", "function", "arg", "packed", "scratch", "limits": {"memory_bytes", "cpu_s"}}``.

    ``blobs``: the request's attachments (list of bytes). With ``"packed":
    true`` the function is called as ``function(arg, blobs)`` and must be
    marked :func:`codec.packed`; otherwise as ``function(arg)``.

    Returns ``(reply, reply_blobs)``; reply is ``{"ok": True, "result": ...}`` or ``{"ok": False, "error":
    {"kind", "message", "traceback"}}``, plus ``"integrity"`` (list of
    changes found after the call) and ``"restart"`` (bool: the worker should
    be replaced). Error kinds: out_of_memory (MemoryError),
    sandbox_violation (PermissionError from seccomp/Landlock), crash
    (SystemExit), python_error (anything else).
    """
    limits = message.get("limits") or {}
    scratch = message.get("scratch")
    reply = {"ok": False, "integrity": [], "restart": False}
    reply_blobs = []
    try:
        if scratch:
            os.makedirs(scratch, exist_ok=True)
            _clear(scratch)
            os.chdir(scratch)
            os.environ["TMPDIR"] = scratch
            tempfile.tempdir = scratch
        if limits.get("memory_bytes"):
            _set_limit(resource.RLIMIT_AS, int(limits["memory_bytes"]))
        if limits.get("cpu_s"):
            used = resource.getrusage(resource.RUSAGE_SELF)
            _set_limit(resource.RLIMIT_CPU, int(used.ru_utime + used.ru_stime + float(limits["cpu_s"])) + 1)
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
        reply["restart"] = True
    except OSError as exc:
        kind = "sandbox_violation" if exc.errno in (1, 13) else "python_error"
        reply["error"] = {"kind": kind, "message": f"{type(exc).__name__}: {exc}",
                          "traceback": R.format_exception(exc)}
    except SystemExit as exc:
        reply["error"] = {"kind": "crash", "message": f"SystemExit({exc.code!r})", "traceback": ""}
    except BaseException as exc:  # noqa: BLE001 - report everything, keep serving
        reply["error"] = {"kind": "python_error", "message": f"{type(exc).__name__}: {exc}",
                          "traceback": R.format_exception(exc)}
    finally:
        for which in (resource.RLIMIT_AS, resource.RLIMIT_CPU):
            try:
                _reset_limit(which)
            except (ValueError, OSError):
                reply["restart"] = True
        try:
            os.chdir("/")
        except OSError:
            pass
    result = reply.get("result")
    if isinstance(result, dict) and isinstance(result.get("error"), dict) \
            and result["error"].get("kind") == "out_of_memory":
        reply["restart"] = True  # a MemoryError can leave the heap fragmented or half-updated
    if "result" in reply:
        reply["result"] = _finite(reply["result"])
    if _baseline is not None:
        changes = integrity.compare(_baseline)
        if changes:
            reply["integrity"] = changes
            reply["restart"] = True
    if not reply["ok"]:
        reply_blobs = []
    return reply, reply_blobs
