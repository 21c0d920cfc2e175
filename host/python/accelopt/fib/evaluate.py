"""Entry points of a FIB evaluation, called by plugins/flashinfer (docs/flashinfer.md).

* :func:`open_workload` / :func:`close_workload`: a session per (definition,
  workload): the seeded inputs of every trial, drawn in the host.
* :func:`trial`: one trial of the reference or of a solution. Through the
  host's isolated-call service it runs in a worker of the ``torch`` pool
  (accelopt.sandbox.trusted dispatches this name to
  :mod:`accelopt.fib.trusted`); called directly, it runs in this process.
* :func:`environment`: the evaluation's environment record.
"""
import platform
import sys

from .trusted import close_workload, open_workload, trial  # noqa: F401 - the plugin's entry points


def _cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def environment(_arg=None):
    """{"hardware", "libs"} as FIB records it, for the CPU tier: hardware is the CPU's model
    name (FIB: torch.cuda.get_device_name()), libs the versions of torch, numpy and Python."""
    import numpy
    import torch
    libs = {"torch": torch.__version__, "numpy": numpy.__version__, "python": sys.version.split()[0]}
    try:
        import triton  # noqa: F401 - recorded when importable, as FIB does
        libs["triton"] = triton.__version__
    except ImportError:
        pass
    return {"hardware": "CPU: " + _cpu_name(), "libs": libs}


def torch_available(_arg=None):
    """{"available": bool, "version"?: str, "reason"?: str}: whether this interpreter imports torch."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure means no CPU tier
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}"}
    return {"available": True, "version": torch.__version__}
