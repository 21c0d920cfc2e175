"""The Neuron hardware backend: AccelOpt's measurement procedure (accelopt-facts §2.2).

Compile + run with ``<namespace>.baremetal(kernel, additional_compile_opt=...)`` (the
namespace of the kernel's own decorator) under ``NEURON_ENV``; latency =
``summary[first_key]["total_time"] * 1e3`` (ms) of ``neuron-profile view --output-format
summary-json``; 2 warm-ups + 10 timed runs, mean, re-measured up to twice while
(max-min)/min > 1 %, keeping the steadiest set. Unlike AccelOpt, the profiler's exit
status is checked and the metrics come from the same runs as the latency.

Timing modes (``timing_mode``, docs/trainium.md): "capture" keeps the NEFF of the timed
input set's run and the trusted host runs it with ``neuron-profile capture`` for every
warm-up and timed run (one compile per input set, none for timing); "baremetal" is
AccelOpt's own protocol, where every timed run compiles again. In a sandboxed worker the
candidate only compiles and runs; the host profiles what it left
(:mod:`accelopt.backends.device_profile`). Tested without hardware against a stand-in
SDK (tests/fixtures/neuron_sdk*); the SDK is imported lazily.
"""
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

from .base import PROFILE_FIELDS, Backend

COMPILE_OPTS = "--disable-dge --logical-nc-config=1"  # AccelOpt's (trn1); compile_opts(target) in general
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


# Where a trn2 worker's runtime and compiler agree on the logical NeuronCore size
# (about-neuron/arch/neuron-features/logical-neuroncore-config.rst, SDK 2.28: "You must compile
# your Models to use the LNC configuration set by the Neuron Runtime environment variable").
LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"
# The compile target of nki.jit in SDK 2.28 (nki/api/nki/__init__.py stub: "trn1", "trn2", ...).
PLATFORM_ENV = "NEURON_PLATFORM_TARGET_OVERRIDE"
TIMING_MODES = ("capture", "baremetal")


def lnc_for(target):
    """The logical NeuronCore size the backend compiles and runs with on ``target``.

    trn1 has one (EARG001: only lnc=1 on trn1). On trn2: $ACCELOPT_NEURON_LNC, else 1 (one
    physical core per worker, as AccelOpt's and nki-kernel-agent's ``--logical-nc-config=1``);
    a NEURON_LOGICAL_NC_CONFIG the user's shell sets is overridden in the worker so that the
    runtime agrees with the compile option. Raises ValueError for another value.
    """
    if target != "trn2":
        return 1
    text = os.environ.get("ACCELOPT_NEURON_LNC") or "1"
    if text.strip() not in ("1", "2"):
        raise ValueError(f"logical NeuronCore config must be 1 or 2, got {text!r} (ACCELOPT_NEURON_LNC)")
    return int(text)


def compile_opts(target):
    """``additional_compile_opt`` of every compile: AccelOpt's, with the LNC the runtime uses."""
    return f"--disable-dge --logical-nc-config={lnc_for(target)}"


def timing_mode():
    """How a candidate is timed: "capture" (default: the host runs neuron-profile capture on the
    candidate's one NEFF) or "baremetal" (AccelOpt's protocol: every timed run compiles again);
    $ACCELOPT_NEURON_TIMING. Raises ValueError for another value."""
    mode = os.environ.get("ACCELOPT_NEURON_TIMING") or "capture"
    if mode not in TIMING_MODES:
        raise ValueError(f"ACCELOPT_NEURON_TIMING must be one of {TIMING_MODES}, got {mode!r}")
    return mode


def _kernel_objects(kernel):
    """``kernel`` and what it wraps (decorators keep the wrapped object in __wrapped__ or func)."""
    seen, todo = [], [kernel]
    while todo and len(seen) < 8:
        item = todo.pop()
        if item is None or any(item is other for other in seen):
            continue
        seen.append(item)
        for attr in ("__wrapped__", "func", "__nki_function__"):
            try:
                todo.append(getattr(item, attr, None))
            except Exception:  # noqa: BLE001 - a hostile attribute is no namespace
                pass
    return seen


def kernel_namespace(kernel):
    """The NKI namespace ``kernel`` was written for: its decorator's package ("neuronxcc.nki"
    for ``neuronxcc.nki.jit``, "nki" for SDK 2.28's ``nki.jit``), else the package of the NKI
    modules its function's globals name; None when neither tells."""
    for item in _kernel_objects(kernel):
        top = (getattr(type(item), "__module__", "") or "").split(".")[0]
        if top == "neuronxcc":
            return "neuronxcc.nki"
        if top == "nki":
            return "nki"
    for item in _kernel_objects(kernel):
        names = getattr(item, "__globals__", None)
        if not isinstance(names, dict):
            continue
        packages = {(getattr(v, "__name__", "") or "").split(".")[0] for v in list(names.values())
                    if isinstance(v, type(os))}
        if "neuronxcc" in packages:
            return "neuronxcc.nki"
        if "nki" in packages:
            return "nki"
    return None


def kernel_files(kernel):
    """Source files of ``kernel``'s function(s): a traceback frame there is the body being traced."""
    files = []
    for item in _kernel_objects(kernel):
        code = getattr(item, "__code__", None)
        name = getattr(code, "co_filename", None)
        if isinstance(name, str) and name not in files:
            files.append(name)
    return files


class NeuronBackend(Backend):
    """Runs kernels on a NeuronCore through the Neuron SDK. See Backend for the methods.

    Each kernel goes through the namespace its decorator comes from: SDK 2.28 ships both
    ``nki`` (NKI Beta 2) and ``neuronxcc.nki`` (the legacy namespace of the NKIBench
    kernels), and a kernel of one cannot be compiled by the other (docs/trainium.md).

    ``external_profiler``: in a sandboxed worker, ``measure`` is not used;
    :meth:`save_profile_runs` leaves a NEFF (``timing_mode`` "capture": the host runs
    ``neuron-profile capture`` on it) or one NEFF/NTFF pair per timed run ("baremetal") in
    the scratch folder and the trusted host runs ``neuron-profile`` on them.
    """

    name = "neuron"
    estimated = False

    def __init__(self, target, workdir=None, external_profiler=False):
        super().__init__(target)
        self._modules = {}
        self._workdir = workdir
        self._options = {}
        self._kernel_files = []
        self._profiled_neff = None
        self.external_profiler = external_profiler
        self.timing_mode = "baremetal"
        self.sdk = None

    def prepare(self):
        """Sets the environment the SDK runs under and checks a real SDK is importable.

        NEURON_ENV (AccelOpt's), NEURON_PLATFORM_TARGET_OVERRIDE = the target, and on trn2
        NEURON_LOGICAL_NC_CONFIG = the LNC the compile option names. Raises RuntimeError if
        no real SDK is importable or an emulator sits under its name.
        """
        if self.sdk is not None:
            return
        from .sdk import is_emulator_module, sdk_info
        info = sdk_info()
        if not info["available"]:
            raise RuntimeError(info["reason"].split(";")[0])
        for name in ("nki", "neuronxcc.nki"):
            module = sys.modules.get(name)
            if module is not None and is_emulator_module(module):
                raise RuntimeError(f"{name} is the emulator in this process; cannot use hardware")
        try:
            lnc = lnc_for(self.target)
        except ValueError as exc:
            raise RuntimeError(str(exc)) from exc
        os.environ.update(NEURON_ENV)
        os.environ[PLATFORM_ENV] = self.target
        if self.target == "trn2":
            os.environ[LNC_ENV] = str(lnc)
        self._options = {"additional_compile_opt": compile_opts(self.target), "platform_target": self.target}
        self.sdk = info

    def compile_options(self):
        """The keywords every baremetal call gets (after :meth:`prepare`)."""
        return dict(self._options)

    def _namespace(self, kernel):
        """The imported SDK module whose ``baremetal`` compiles ``kernel``; RuntimeError if none."""
        from .sdk import is_emulator_module
        namespace = kernel_namespace(kernel) or self.sdk["namespace"]
        if namespace not in self._modules:
            try:
                module = importlib.import_module(namespace)
            except ImportError as exc:
                raise RuntimeError(f"the kernel is written for {namespace}, which this Neuron SDK does not "
                                   f"provide: {exc}") from exc
            if is_emulator_module(module):
                raise RuntimeError(f"{namespace} is the emulator in this process; cannot use hardware")
            self._modules[namespace] = module
        return namespace, self._modules[namespace]

    def _baremetal(self, kernel, args, neff=None, ntff=None):
        self.prepare()
        namespace, module = self._namespace(kernel)
        self._kernel_files = kernel_files(kernel)
        options = dict(self._options)
        if namespace == "nki":
            options.pop("platform_target")  # nki (2.28) takes its target from PLATFORM_ENV
        if neff:
            options["save_neff_name"] = neff
        if ntff:
            options["save_trace_name"] = ntff
        try:
            compiled = module.baremetal(kernel, **options)
        except NotImplementedError as exc:
            raise NotImplementedError(
                f"{namespace}.baremetal is not available in this Neuron SDK ({exc}); SDK 2.28 runs kernels "
                "standalone only through the neuronxcc.nki namespace (release notes, NKI 2.28.0)") from exc
        return compiled(*args)

    def run(self, kernel, args, profiled=False):
        """Compiles and runs ``kernel(*args)`` on the device; returns its outputs.

        ``profiled`` in timing mode "capture": the compile's NEFF is kept (the one NEFF the
        timing runs execute, :meth:`save_profile_runs`)."""
        if profiled and self.timing_mode == "capture":
            folder = self._workdir or tempfile.gettempdir()
            name = f"kernel_{uuid.uuid4().hex[:12]}.neff"
            outputs = self._baremetal(kernel, args, os.path.join(folder, name))
            self._profiled_neff = (folder, name)
            return outputs
        return self._baremetal(kernel, args)

    def error_kind(self, exc):
        """compile_error, device_unavailable or config_error by the SDK's documented forms
        (accelopt.backends.neuron_errors), else None (runtime_error)."""
        from .neuron_errors import classify
        return classify(exc, self._kernel_files)

    def is_compile_error(self, exc):
        return self.error_kind(exc) == "compile_error"

    def save_profile_runs(self, kernel, args, workdir=None, warmup=WARMUP, iters=ITERS):
        """One round of AccelOpt's timing protocol without the profiler.

        Runs ``warmup`` plain runs, then ``iters`` runs that each save a
        NEFF and an NTFF into ``workdir`` (default: the temp folder, which
        in a worker is its scratch). Returns [{"neff": name, "ntff": name}]
        (file names inside ``workdir``) in run order. Raises what the SDK
        raises.
        """
        workdir = workdir or self._workdir or tempfile.gettempdir()
        if self.timing_mode == "capture":
            return self._capture_artifact(kernel, args, workdir)
        for _ in range(warmup):
            self._baremetal(kernel, args)
        artifacts = []
        for index in range(iters):
            stem = f"profile_{index:02d}_{uuid.uuid4().hex[:12]}"
            self._baremetal(kernel, args, os.path.join(workdir, stem + ".neff"), os.path.join(workdir, stem + ".ntff"))
            artifacts.append({"neff": stem + ".neff", "ntff": stem + ".ntff"})
        return artifacts

    def _capture_artifact(self, kernel, args, workdir):
        """[{"neff": name}]: the NEFF of the profiled run (compiled again only if there was none)."""
        if self._profiled_neff is None or self._profiled_neff[0] != workdir or \
                not os.path.exists(os.path.join(*self._profiled_neff)):
            name = f"kernel_{uuid.uuid4().hex[:12]}.neff"
            self._baremetal(kernel, args, os.path.join(workdir, name))
            self._profiled_neff = (workdir, name)
        return [{"neff": self._profiled_neff[1]}]

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
            # In-process timing (no worker) is AccelOpt's own protocol; capture mode is the
            # host's, on what a sandboxed worker left (device_profile).
            stats = benchmark(lambda: self._profile_once(kernel, args, workdir),
                              lambda: self._baremetal(kernel, args))
        metrics = dict(stats["metrics"])
        metrics.update({k: stats[k] for k in ("min_ms", "max_ms", "rel_diffs", "rounds")})
        return stats["latency_ms"], metrics
