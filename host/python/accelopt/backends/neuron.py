"""The Neuron hardware backend: AccelOpt's measurement procedure (accelopt-behavior §2.2).

Compile + run with ``nki.baremetal(..., additional_compile_opt=COMPILE_OPTS)``
under ``NEURON_ENV``; each timed iteration saves a NEFF/NTFF and reads
``neuron-profile view --output-format summary-json``; latency =
``summary[first_key]["total_time"] * 1e3`` (ms); 2 warm-ups + 10 timed runs,
mean, re-measured up to twice while (max-min)/min > 1 %, keeping the
steadiest set. Unlike AccelOpt, the profiler's exit status is checked and the
metrics come from the same runs as the latency.

Only the pieces without hardware (command line, summary parsing, retry policy)
are testable here; ``neuronxcc`` is imported lazily.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

from . import PROFILE_FIELDS, Backend

COMPILE_OPTS = "--disable-dge --logical-nc-config=1"
NEURON_ENV = {"NEURON_CC_FLAGS": "--auto-cast=none", "NEURON_RT_NUM_CORES": "1"}
WARMUP = 2
ITERS = 10
PERF_TOL = 0.01
MAX_RETRIES = 2
PROFILE_TIMEOUT_S = 300


def profile_command(neff_path, ntff_path):
    """Returns the argv (list of str) that prints neuron-profile's summary JSON for one run."""
    return ["neuron-profile", "view", "--output-format", "summary-json",
            "-n", str(neff_path), "-s", str(ntff_path)]


def parse_summary(text):
    """Parses neuron-profile summary-json text.

    Returns (latency_ms: float, metrics: dict): latency is
    ``summary[first_key]["total_time"] * 1e3``; metrics holds ``total_time``
    (s) and those of PROFILE_FIELDS present in the first entry.
    Raises ValueError on text that is not such a summary.
    """
    try:
        summary = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"neuron-profile output is not JSON: {exc}") from exc
    if not isinstance(summary, dict) or not summary:
        raise ValueError("neuron-profile summary is not a non-empty JSON object")
    first = summary[next(iter(summary))]
    if not isinstance(first, dict) or "total_time" not in first:
        raise ValueError("neuron-profile summary lacks total_time")
    total = float(first["total_time"])
    if not total > 0:
        raise ValueError(f"neuron-profile total_time is not positive: {first['total_time']!r}")
    metrics = {"total_time": total}
    for field in PROFILE_FIELDS:
        if field in first:
            value = first[field]
            try:
                metrics[field] = float(value)
            except (TypeError, ValueError):
                metrics[field] = value
    return total * 1e3, metrics


def timing_stats(samples_ms):
    """Returns {"latency_ms" (mean), "min_ms", "max_ms", "rel_diffs" ((max-min)/min)} of a non-empty list."""
    lo, hi = min(samples_ms), max(samples_ms)
    return {"latency_ms": sum(samples_ms) / len(samples_ms), "min_ms": lo, "max_ms": hi,
            "rel_diffs": (hi - lo) / lo if lo > 0 else float("inf")}


def benchmark(measure_once, warm_once, warmup=WARMUP, iters=ITERS, perf_tol=PERF_TOL,
              max_retries=MAX_RETRIES, sleep=time.sleep):
    """Runs AccelOpt's timing protocol.

    ``warm_once()`` runs the kernel untimed; ``measure_once()`` returns
    (latency_ms, metrics) of one profiled run. One round = ``warmup`` warm-ups
    and ``iters`` measurements; while a round's rel_diffs > ``perf_tol`` and
    retries remain, sleep 1 s and measure a new round. Returns the stats of the
    round with the smallest rel_diffs (timing_stats keys) plus "samples_ms"
    (list), "rounds" (int) and "metrics" (of that round's last run).
    """
    best = None
    rounds = 0
    while True:
        rounds += 1
        for _ in range(warmup):
            warm_once()
        samples, metrics = [], {}
        for _ in range(iters):
            latency, metrics = measure_once()
            samples.append(latency)
        stats = timing_stats(samples)
        stats.update(samples_ms=samples, metrics=metrics)
        if best is None or stats["rel_diffs"] < best["rel_diffs"]:
            best = stats
        if stats["rel_diffs"] <= perf_tol or rounds > max_retries:
            break
        sleep(1.0)
    best["rounds"] = rounds
    return best


class NeuronBackend(Backend):
    """Runs kernels on a NeuronCore through neuronxcc. See Backend for the methods."""

    name = "neuron"
    estimated = False

    def __init__(self, target, workdir=None):
        super().__init__(target)
        self._nki = None
        self._workdir = workdir

    def prepare(self):
        """Sets NEURON_ENV and imports the real ``neuronxcc.nki``. Raises RuntimeError if absent or emulated."""
        os.environ.update(NEURON_ENV)
        try:
            from neuronxcc import nki
        except ImportError as exc:
            raise RuntimeError(f"neuronxcc is not installed: {exc}") from exc
        if getattr(sys.modules.get("neuronxcc"), "__nki_emu__", False):
            raise RuntimeError("neuronxcc is the emulator in this process; cannot use hardware")
        self._nki = nki

    def _baremetal(self, kernel, args, neff=None, ntff=None):
        if self._nki is None:
            self.prepare()
        options = {"additional_compile_opt": COMPILE_OPTS}
        if neff:
            options.update(save_neff_name=neff, save_trace_name=ntff)
        return self._nki.baremetal(kernel, **options)(*args)

    def run(self, kernel, args, profiled=False):
        """Compiles and runs ``kernel(*args)`` on the device; returns its outputs."""
        return self._baremetal(kernel, args)

    def is_compile_error(self, exc):
        """Heuristic: neuronxcc compile failures name the compiler in their type or message."""
        text = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
        return any(marker in text for marker in ("Compil", "neuronx-cc", "NCC_", "[NKI", "err_"))

    def _profile_once(self, kernel, args, workdir):
        stem = os.path.join(workdir, uuid.uuid4().hex)
        neff, ntff = stem + ".neff", stem + ".ntff"
        self._baremetal(kernel, args, neff, ntff)
        proc = subprocess.run(profile_command(neff, ntff), capture_output=True, text=True,
                              timeout=PROFILE_TIMEOUT_S, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"neuron-profile failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        for path in (neff, ntff):
            if os.path.exists(path):
                os.remove(path)
        return parse_summary(proc.stdout)

    def measure(self, kernel, args):
        """Times ``kernel`` on ``args`` with ``benchmark``; returns (latency_ms, metrics).

        metrics = the profile fields plus min_ms, max_ms, rel_diffs, rounds.
        Raises RuntimeError if neuron-profile fails.
        """
        with tempfile.TemporaryDirectory(prefix="nki_", dir=self._workdir) as workdir:
            stats = benchmark(lambda: self._profile_once(kernel, args, workdir),
                              lambda: self._baremetal(kernel, args))
        metrics = dict(stats["metrics"])
        metrics.update({k: stats[k] for k in ("min_ms", "max_ms", "rel_diffs", "rounds")})
        return stats["latency_ms"], metrics
