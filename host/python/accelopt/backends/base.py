"""The backend interface and the profile fields every backend reports (docs/architecture.md)."""
# The profile fields AccelOpt keeps (docs/accelopt-facts.md, accelopt-facts §2.4).
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
    # True when the backend runs several input sets in one call (the emulator's
    # ``emulator_module()``/``timing_of()``, accelopt.batched_runs); others run them one by one.
    batches = False

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
