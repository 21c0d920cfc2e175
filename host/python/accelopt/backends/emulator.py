"""The NKI emulator backend (``host/python/nki_emu``).

Every run goes through ``nki_emu.run``; latency is the emulator's cost-model
estimate for the most recent run (so ``estimated`` is True) and metrics are
its profile fields (neuron-profile names, per-engine busy times, bottleneck).
"""
from .base import Backend
from .. import jsonable


class EmulatorBackend(Backend):
    """Runs kernels on the NumPy NKI emulator. See Backend for the methods."""

    name = "emulator"
    estimated = True
    batches = True  # several input sets can share one call (accelopt.batched_runs)

    def __init__(self, target):
        super().__init__(target)
        self._emu = None
        self._last_profile = None
        self._last_args = None
        self._profile_error = None

    def prepare(self):
        """Imports nki_emu and registers it as ``neuronxcc.nki``/``nki``. Raises RuntimeError if missing."""
        try:
            import nki_emu
        except ImportError as exc:
            raise RuntimeError(f"the NKI emulator (nki_emu) cannot be imported: {exc}") from exc
        nki_emu.install()
        self._emu = nki_emu

    def run(self, kernel, args, profiled=False):
        """Runs ``kernel(*args)`` in the emulator; returns its outputs.

        With ``profiled`` the run is traced by the cost model and its profile
        kept for ``measure``; otherwise cost bookkeeping is skipped (faster).
        """
        if self._emu is None:
            self.prepare()
        self._last_profile = self._last_args = self._profile_error = None
        if not profiled:
            return self._emu.run(kernel, list(args), target=self.target, trace=False).outputs
        try:
            outcome = self._emu.run(kernel, list(args), target=self.target, trace=True)
        except Exception as exc:  # noqa: BLE001 - decide below whose fault it is
            if self.error_kind(exc) is not None:
                raise
            # If the kernel runs without cost tracing, the cost model failed,
            # not the kernel: keep the outputs, report it from measure().
            outputs = self._emu.run(kernel, list(args), target=self.target, trace=False).outputs
            self._profile_error, self._last_args = exc, args
            return outputs
        self._last_profile, self._last_args = outcome.profile, args
        return outcome.outputs

    def emulator_module(self):
        """The ``nki_emu`` module (prepared), for batched runs (accelopt.batched_runs)."""
        if self._emu is None:
            self.prepare()
        return self._emu

    def timing_of(self, profile):
        """(latency_ms, metrics) of a profile the emulator returned (a batched call's
        traced member). Raises RuntimeError when it holds no usable latency."""
        return profile_to_timing(profile)

    def is_compile_error(self, exc):
        """True for ``nki_emu.errors.NKICompileError`` (validation of NKI rules)."""
        errors = getattr(self._emu, "errors", None)
        cls = getattr(errors, "NKICompileError", None)
        return cls is not None and isinstance(exc, cls)

    def error_kind(self, exc):
        """"compile_error" for NKICompileError, "unwritten_output" for
        ``nki_emu.errors.UnwrittenOutputError`` (an output that no store/DMA produced
        in full), else None."""
        if self.is_compile_error(exc):
            return "compile_error"
        errors = getattr(self._emu, "errors", None)
        cls = getattr(errors, "UnwrittenOutputError", None)
        if cls is not None and isinstance(exc, cls):
            return "unwritten_output"
        return None

    def measure(self, kernel, args):
        """Returns the cost-model latency (ms) and profile metrics of the run on ``args``.

        Re-runs the kernel if the last run used other inputs. Raises
        RuntimeError if the profile holds no latency.
        """
        if self._last_args is not args:
            self.run(kernel, args, profiled=True)
        if self._profile_error is not None:
            exc = self._profile_error
            raise RuntimeError(f"the emulator's cost model failed: {type(exc).__name__}: {exc}") from exc
        return profile_to_timing(self._last_profile)


def profile_to_timing(profile):
    """Returns (latency_ms, metrics) from an emulator profile (dict or record).

    ``latency_ms`` comes from ``latency_ms``, else ``total_time`` (s) * 1e3.
    ``metrics`` holds every JSON-representable profile field. Raises
    RuntimeError when neither latency field is a positive finite number.
    """
    if profile is None:
        raise RuntimeError("the emulator returned no profile")
    fields = jsonable.record_to_dict(profile)
    metrics = jsonable.to_json(fields) or {}
    latency = metrics.get("latency_ms")
    if not isinstance(latency, (int, float)) or isinstance(latency, bool):
        total = metrics.get("total_time")
        latency = total * 1e3 if isinstance(total, (int, float)) and not isinstance(total, bool) else None
    if latency is None or not latency > 0:
        raise RuntimeError(f"emulator profile has no usable latency (keys: {sorted(fields)})")
    return float(latency), metrics
