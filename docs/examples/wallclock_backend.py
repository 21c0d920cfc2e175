"""A backend: the contract of ``accelopt.backends.Backend`` implemented in full.

This one runs kernels on the NKI emulator for correctness and reports the wall
time of the emulated run as its "measured" latency (docs/extending.md,
"Backend"). A real backend would run on a device here. Tested by
tests/python/harness/test_backend_example.py.
"""
import time

from accelopt.backends import Backend


class WallClockBackend(Backend):
    """Emulated execution, wall-clock latency (ms); no profile metrics."""

    name = "wallclock"
    estimated = False  # a measurement, not a cost-model estimate

    def __init__(self, target, repeats=3):
        super().__init__(target)  # ValueError for a target other than trn1/trn2
        self.repeats = repeats
        self._emu = None

    def prepare(self):
        """Makes ``neuronxcc.nki`` importable for kernel modules (here: the emulator).
        Raises RuntimeError when that is impossible."""
        try:
            import nki_emu
        except ImportError as exc:
            raise RuntimeError(f"nki_emu cannot be imported: {exc}") from exc
        nki_emu.install()
        self._emu = nki_emu

    def run(self, kernel, args, profiled=False):
        """Runs ``kernel(*args)`` (NumPy arrays and scalars in the kernel's layout) and
        returns its raw outputs; raises whatever compilation or execution raises."""
        if self._emu is None:
            self.prepare()
        return self._emu.run(kernel, list(args), target=self.target, trace=False).outputs

    def is_compile_error(self, exc):
        """True when ``exc`` (raised by ``run``) means the kernel would not compile."""
        return self._emu is not None and isinstance(exc, self._emu.errors.NKICompileError)

    def measure(self, kernel, args):
        """(latency_ms, metrics) on the inputs of the last run: the best of
        ``repeats`` wall-clock runs, no metrics."""
        best = float("inf")
        for _ in range(self.repeats):
            start = time.perf_counter()
            self.run(kernel, args)
            best = min(best, (time.perf_counter() - start) * 1e3)
        return best, {}
