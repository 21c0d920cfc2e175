"""Where kernels run: the NKI emulator or Neuron hardware, behind one interface.

A backend compiles and runs a kernel on NumPy inputs (``run``), says whether
an exception is a compile error (``is_compile_error``) or which error kind it
is (``error_kind``), and measures latency
and profile metrics of the last run's inputs (``measure``).
"""
# The profile fields AccelOpt keeps (prompts/profile_list.json; accelopt-behavior §2.4).
PROFILE_FIELDS = (
    "hbm_read_bytes", "hbm_write_bytes", "psum_read_bytes", "psum_write_bytes",
    "sbuf_read_bytes", "sbuf_write_bytes", "spill_reload_bytes", "spill_save_bytes",
    "hardware_flops", "transpose_flops", "peak_flops_bandwidth_ratio", "mm_arithmetic_intensity",
    "hfu_estimated_percent", "scalar_engine_active_time_percent",
    "vector_engine_active_time_percent", "gpsimd_engine_active_time_percent",
)

BACKEND_NAMES = ("auto", "emulator", "neuron")
TARGETS = ("trn1", "trn2")


class Backend:
    """Interface of an execution backend.

    Attributes: ``name`` (str), ``target`` ("trn1"|"trn2"), ``estimated``
    (bool: latency comes from a cost model rather than a measurement).
    """

    name = "base"
    estimated = False

    def __init__(self, target):
        if target not in TARGETS:
            raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
        self.target = target

    def prepare(self):
        """Makes the NKI namespaces importable for kernel modules. Raises RuntimeError if impossible."""
        raise NotImplementedError

    def run(self, kernel, args, profiled=False):
        """Compiles (if needed) and runs ``kernel(*args)``; returns its raw outputs.

        ``args``: list of NumPy arrays / Python scalars in the kernel's layout.
        ``profiled``: a hint that ``measure`` will follow on these inputs (a
        backend may then keep what it needs from this run).
        Raises whatever compilation or execution raises.
        """
        raise NotImplementedError

    def is_compile_error(self, exc):
        """True if ``exc`` (raised by ``run``) is a compilation/validation error."""
        raise NotImplementedError

    def error_kind(self, exc):
        """The result error kind of ``exc`` raised by ``run`` when the backend knows it
        ("compile_error", "unwritten_output"), else None (the caller's default)."""
        if self.is_compile_error(exc):
            return "compile_error"
        return None

    def measure(self, kernel, args):
        """Returns (latency_ms: float, metrics: dict) for ``kernel`` on ``args``.

        ``args`` are the inputs of the last ``run``. Raises on failure.
        """
        raise NotImplementedError


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
