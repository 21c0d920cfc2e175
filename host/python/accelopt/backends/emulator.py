"""The NKI emulator backend (``host/python/nki_emu``).

Every run goes through ``nki_emu.run``; latency is the emulator's cost-model
estimate for the most recent run (so ``estimated`` is True) and metrics are
its profile fields (neuron-profile names, per-engine busy times, bottleneck).
"""
from . import Backend
from .. import jsonable


class EmulatorBackend(Backend):
    """Runs kernels on the NumPy NKI emulator. See Backend for the methods."""

    name = "emulator"
    estimated = True

    def __init__(self, target):
        super().__init__(target)
        self._emu = None
        self._last_profile = None
        self._last_args = None

    def prepare(self):
        """Imports nki_emu and registers it as ``neuronxcc.nki``/``nki``. Raises RuntimeError if missing."""
        try:
            import nki_emu
        except ImportError as exc:
            raise RuntimeError(f"the NKI emulator (nki_emu) cannot be imported: {exc}") from exc
        nki_emu.install()
        self._emu = nki_emu

    def run(self, kernel, args):
        """Runs ``kernel(*args)`` in the emulator; returns its outputs and keeps the profile."""
        if self._emu is None:
            self.prepare()
        self._last_profile = None
        outcome = self._emu.run(kernel, list(args), target=self.target)
        self._last_profile = outcome.profile
        self._last_args = args
        return outcome.outputs

    def is_compile_error(self, exc):
        """True for ``nki_emu.errors.NKICompileError`` (validation of NKI rules)."""
        errors = getattr(self._emu, "errors", None)
        cls = getattr(errors, "NKICompileError", None)
        return cls is not None and isinstance(exc, cls)

    def measure(self, kernel, args):
        """Returns the cost-model latency (ms) and profile metrics of the run on ``args``.

        Re-runs the kernel if the last run used other inputs. Raises
        RuntimeError if the profile holds no latency.
        """
        if self._last_profile is None or self._last_args is not args:
            self.run(kernel, args)
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
