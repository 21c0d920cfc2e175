"""The Neuron hardware backend: AccelOpt's measurement procedure (accelopt-facts §2.2).

Compile + run with ``nki.baremetal(..., additional_compile_opt=COMPILE_OPTS)``
under ``NEURON_ENV``; each timed iteration saves a NEFF/NTFF and reads
``neuron-profile view --output-format summary-json``; latency =
``summary[first_key]["total_time"] * 1e3`` (ms); 2 warm-ups + 10 timed runs,
mean, re-measured up to twice while (max-min)/min > 1 %, keeping the
steadiest set. Unlike AccelOpt, the profiler's exit status is checked and the
metrics come from the same runs as the latency.

In a sandboxed worker the candidate only compiles and runs (leaving NEFF/NTFF
files in its scratch folder) and the trusted host runs neuron-profile on them
(:mod:`accelopt.backends.device_profile`). Tested without hardware against a
stand-in SDK (tests/python/fixtures/neuron_sdk); the SDK is imported lazily.
"""
import importlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

from .base import PROFILE_FIELDS, Backend

COMPILE_OPTS = "--disable-dge --logical-nc-config=1"
NEURON_ENV = {"NEURON_CC_FLAGS": "--auto-cast=none", "NEURON_RT_NUM_CORES": "1"}
WARMUP = 2
ITERS = 10
PERF_TOL = 0.01
MAX_RETRIES = 2
PROFILE_TIMEOUT_S = 300
# Where the Neuron packages install their tools and runtime (AWS Neuron setup guide).
NEURON_ROOT = "/opt/aws/neuron"


def profiler_executable():
    """Path of ``neuron-profile``: $ACCELOPT_NEURON_PROFILE, else PATH, else the Neuron tree's bin folder.

    The Neuron packages install it as /opt/aws/neuron/bin/neuron-profile,
    which is not on every PATH (docs/trainium.md). Returns the bare name
    when it is found nowhere (running it then fails with a clear error).
    """
    configured = os.environ.get("ACCELOPT_NEURON_PROFILE")
    if configured:
        return configured
    root = os.environ.get("ACCELOPT_NEURON_ROOT", NEURON_ROOT)
    search = os.environ.get("PATH", os.defpath) + os.pathsep + os.path.join(root, "bin")
    return shutil.which("neuron-profile", path=search) or "neuron-profile"


def profile_command(neff_path, ntff_path, executable="neuron-profile"):
    """Returns the argv (list of str) that prints neuron-profile's summary JSON for one run."""
    return [executable, "view", "--output-format", "summary-json",
            "-n", str(neff_path), "-s", str(ntff_path)]


def run_profiler(neff_path, ntff_path, timeout_s=PROFILE_TIMEOUT_S):
    """Runs neuron-profile on one NEFF/NTFF pair; returns parse_summary's (latency_ms, metrics).

    Raises RuntimeError when the profiler cannot start, exits non-zero or
    runs past ``timeout_s`` seconds; ValueError when its output is not a
    summary.
    """
    argv = profile_command(neff_path, ntff_path, profiler_executable())
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        raise RuntimeError(f"neuron-profile not found ({argv[0]}): install aws-neuronx-tools or set "
                           "ACCELOPT_NEURON_PROFILE") from exc
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"neuron-profile ran past {timeout_s} s on {os.path.basename(ntff_path)}") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"neuron-profile failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return parse_summary(proc.stdout)


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


def _baremetal_accepts(baremetal, keyword):
    """True if ``baremetal`` takes ``keyword`` (or any keyword); unknown signatures count as no."""
    try:
        params = inspect.signature(baremetal).parameters
    except (TypeError, ValueError):
        return False
    return keyword in params or any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())


class NeuronBackend(Backend):
    """Runs kernels on a NeuronCore through the Neuron SDK. See Backend for the methods.

    ``external_profiler``: in a sandboxed worker, ``measure`` is not used;
    :meth:`save_profile_runs` leaves the NEFF/NTFF of each timed run in the
    scratch folder and the trusted host runs ``neuron-profile`` on them
    (docs/trainium.md), so the candidate never starts a program of its own
    beyond the SDK's compiler.
    """

    name = "neuron"
    estimated = False

    def __init__(self, target, workdir=None, external_profiler=False):
        super().__init__(target)
        self._nki = None
        self._workdir = workdir
        self._options = {}
        self.external_profiler = external_profiler
        self.sdk = None

    def prepare(self):
        """Sets NEURON_ENV and imports the SDK's NKI (``nki`` for SDK >= 2.28, else ``neuronxcc.nki``).

        Raises RuntimeError if no real SDK is importable, if the module found
        is the emulator, or if target trn2 is asked of an SDK whose
        ``baremetal`` cannot be told its platform.
        """
        if self._nki is not None:
            return
        os.environ.update(NEURON_ENV)
        from .sdk import is_emulator_module, sdk_info
        info = sdk_info()
        if not info["available"]:
            raise RuntimeError(info["reason"].split(";")[0])
        for name in (info["namespace"], "nki", "neuronxcc.nki"):
            module = sys.modules.get(name)
            if module is not None and is_emulator_module(module):
                raise RuntimeError(f"{name} is the emulator in this process; cannot use hardware")
        try:
            nki = importlib.import_module(info["namespace"])
        except ImportError as exc:
            raise RuntimeError(f"the Neuron SDK ({info['namespace']}) cannot be imported: {exc}") from exc
        if is_emulator_module(nki):
            raise RuntimeError(f"{info['namespace']} is the emulator in this process; cannot use hardware")
        options = {"additional_compile_opt": COMPILE_OPTS}
        if _baremetal_accepts(nki.baremetal, "platform_target"):
            options["platform_target"] = self.target
        elif self.target != "trn1":
            raise RuntimeError(f"target {self.target} needs an SDK whose baremetal takes platform_target "
                               f"(Neuron SDK >= 2.28, namespace nki); found {info['namespace']} "
                               f"{info['version'] or ''}".rstrip())
        self._nki, self._options, self.sdk = nki, options, info

    def _baremetal(self, kernel, args, neff=None, ntff=None):
        self.prepare()
        options = dict(self._options)
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

    def save_profile_runs(self, kernel, args, workdir=None, warmup=WARMUP, iters=ITERS):
        """One round of AccelOpt's timing protocol without the profiler.

        Runs ``warmup`` plain runs, then ``iters`` runs that each save a
        NEFF and an NTFF into ``workdir`` (default: the temp folder, which
        in a worker is its scratch). Returns [{"neff": name, "ntff": name}]
        (file names inside ``workdir``) in run order. Raises what the SDK
        raises.
        """
        workdir = workdir or tempfile.gettempdir()
        for _ in range(warmup):
            self._baremetal(kernel, args)
        artifacts = []
        for index in range(iters):
            stem = f"profile_{index:02d}_{uuid.uuid4().hex[:12]}"
            self._baremetal(kernel, args, os.path.join(workdir, stem + ".neff"), os.path.join(workdir, stem + ".ntff"))
            artifacts.append({"neff": stem + ".neff", "ntff": stem + ".ntff"})
        return artifacts

    def _profile_once(self, kernel, args, workdir):
        stem = os.path.join(workdir, uuid.uuid4().hex)
        neff, ntff = stem + ".neff", stem + ".ntff"
        self._baremetal(kernel, args, neff, ntff)
        try:
            return run_profiler(neff, ntff)
        finally:
            for path in (neff, ntff):
                if os.path.exists(path):
                    os.remove(path)

    def measure(self, kernel, args):
        """Times ``kernel`` on ``args`` with ``benchmark`` in this process; returns (latency_ms, metrics).

        For unsandboxed use (``profile --isolation inprocess``). metrics =
        the profile fields plus min_ms, max_ms, rel_diffs, rounds. Raises
        RuntimeError if neuron-profile fails.
        """
        with tempfile.TemporaryDirectory(prefix="nki_", dir=self._workdir) as workdir:
            stats = benchmark(lambda: self._profile_once(kernel, args, workdir),
                              lambda: self._baremetal(kernel, args))
        metrics = dict(stats["metrics"])
        metrics.update({k: stats[k] for k in ("min_ms", "max_ms", "rel_diffs", "rounds")})
        return stats["latency_ms"], metrics
