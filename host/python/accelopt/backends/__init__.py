"""Where kernels run: the NKI emulator or Neuron hardware, behind one interface.

A backend compiles and runs a kernel on NumPy inputs (``run``), says whether
an exception is a compile error (``is_compile_error``) or which error kind it
is (``error_kind``), and measures latency
and profile metrics of the last run's inputs (``measure``).
"""
from .base import BACKEND_NAMES, PROFILE_FIELDS, TARGETS, Backend  # noqa: F401 - the package's interface


def neuron_available():
    """True if a real (non-emulated) Neuron SDK (``nki`` or ``neuronxcc``) is importable (backends.sdk)."""
    from .sdk import sdk_info
    return sdk_info()["available"]


def choose_backend(name):
    """Resolves ``name`` and says why.

    Returns {"backend": "emulator"|"neuron", "requested": name, "reason":
    str, "sdk_version": str|None, "namespace": "nki"|"neuronxcc.nki"|None}.
    "auto" is the real SDK when it is importable in this interpreter, else
    the emulator. Raises ValueError for an unknown name.
    """
    if name not in BACKEND_NAMES:
        raise ValueError(f"unknown backend {name!r}; expected one of {BACKEND_NAMES}")
    if name == "emulator":
        return {"backend": "emulator", "requested": name, "reason": "the emulator was requested",
                "sdk_version": None, "namespace": None}
    from .sdk import sdk_info
    info = sdk_info()
    if name == "neuron":
        reason = "the neuron backend was requested; " + info["reason"] if info["available"] else \
            "the neuron backend was requested but " + info["reason"].split(";")[0]
        return {"backend": "neuron", "requested": name, "reason": reason, "sdk_version": info["version"],
                "namespace": info["namespace"]}
    return {"backend": "neuron" if info["available"] else "emulator", "requested": name,
            "reason": "auto: " + info["reason"], "sdk_version": info["version"], "namespace": info["namespace"]}


def resolve_backend_name(name):
    """Maps "auto" to "neuron" when a real Neuron SDK is importable, else "emulator".

    Raises ValueError for an unknown name.
    """
    return choose_backend(name)["backend"]


def make_backend(name, target, external_profiler=False):
    """Returns a Backend for ``name`` ("auto"|"emulator"|"neuron") and ``target``.

    ``external_profiler`` (neuron only): timed runs leave NEFF/NTFF files for
    the trusted host to profile (NeuronBackend). Raises ValueError for an
    unknown name or target.
    """
    resolved = resolve_backend_name(name)
    if resolved == "neuron":
        from .neuron import NeuronBackend
        return NeuronBackend(target, external_profiler=external_profiler)
    from .emulator import EmulatorBackend
    return EmulatorBackend(target)


def instance_family():
    """"trn1" or "trn2" from neuron-ls (the instance type in its header, else the trn2-only
    ``logical_neuroncore_config`` field), or None where neuron-ls is missing or fails."""
    from . import neuron_cores
    try:
        return neuron_cores.listing(lnc=1)["family"]
    except (RuntimeError, ValueError):
        return None


def resolve_target(target, backend):
    """The NeuronCore generation to compile for and estimate: ``target`` when it names one
    ("trn1"/"trn2"); for "auto", the instance's family on the neuron backend (neuron-ls),
    else "trn1" (the calibrated emulator target). Raises ValueError for another value."""
    if target in TARGETS:
        return target
    if target != "auto":
        raise ValueError(f"unknown target {target!r}; expected auto or one of {TARGETS}")
    if backend == "neuron":
        return instance_family() or "trn1"
    return "trn1"
