"""The trusted half of hardware timing: neuron-profile on what a worker left behind.

A sandboxed candidate on the neuron backend compiles and runs its kernel and
leaves files in its worker's scratch folder (NeuronBackend.save_profile_runs). The
host, while it still holds that worker (nothing in its sandbox runs any more, so its
NeuronCore is free), checks the files and, in its own process:

* timing mode "capture": runs the candidate's one NEFF with ``neuron-profile capture
  -n NEFF -s NTFF`` on that worker's NeuronCore for each warm-up and timed run
  (Neuron Profiler user guide, SDK 2.28: capture "takes a given compiled NEFF, executes
  it, and collects the profile results"), and the whole timing protocol, re-measured
  rounds included, here: no run compiles again, and the NTFF is written by the
  profiler, not by candidate code;
* timing mode "baremetal" (AccelOpt's protocol): runs ``neuron-profile view`` on the
  NEFF/NTFF pair of each timed run the candidate made.

The profiler's answer never passes through candidate code (docs/trainium.md).
"""
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
import uuid

from .neuron import (LNC_ENV, MAX_RETRIES, PERF_TOL, PROFILE_TIMEOUT_S, benchmark, lnc_for, profiler_executable,
                     run_profiler, timing_mode, timing_stats)

# The names NeuronBackend.save_profile_runs gives its files; anything else is refused.
_ARTIFACT_NAME = re.compile(r"^(profile_[0-9]{2}_[0-9a-f]{12}\.(neff|ntff)|kernel_[0-9a-f]{12}\.neff)$")
# A NEFF or NTFF larger than this is refused rather than handed to the profiler (bytes).
MAX_ARTIFACT_BYTES = 8 << 30
MAX_ARTIFACTS = 64


def capture_command(neff_path, ntff_path, executable="neuron-profile"):
    """The argv that runs a NEFF once on the pinned NeuronCore and writes its NTFF (no inputs:
    the documented all-zero inputs)."""
    return [executable, "capture", "-n", str(neff_path), "-s", str(ntff_path)]


def _capture_env(core, target):
    env = dict(os.environ)
    env.update({"NEURON_RT_VISIBLE_CORES": str(core), "NEURON_RT_NUM_CORES": "1"})
    if target == "trn2":
        env[LNC_ENV] = str(lnc_for(target))  # as the NEFF was compiled (NeuronBackend.prepare)
    return env


def _capture(neff, ntff, env, timeout_s):
    argv = capture_command(neff, ntff, profiler_executable())
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                              stdin=subprocess.DEVNULL, env=env)
    except FileNotFoundError as exc:
        raise RuntimeError(f"neuron-profile not found ({argv[0]}): install aws-neuronx-tools or set "
                           "ACCELOPT_NEURON_PROFILE") from exc
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"neuron-profile capture ran past {timeout_s} s on {os.path.basename(neff)}") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"neuron-profile capture failed ({proc.returncode}): "
                           f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
    if not os.path.isfile(ntff):
        raise RuntimeError(f"neuron-profile capture wrote no {os.path.basename(ntff)}")


def capture_benchmark(neff, core, target, workdir, timeout_s=None, sleep=time.sleep):
    """AccelOpt's timing protocol on one compiled NEFF: each warm-up and timed run is a
    ``neuron-profile capture`` (a fresh load and one execution, as each of AccelOpt's
    baremetal runs is), each timed run's NTFF read with ``neuron-profile view``.

    ``core``: the NeuronCore (NEURON_RT_VISIBLE_CORES); ``workdir``: where the NTFFs go
    (removed after reading). Returns neuron.benchmark's stats (latency_ms, samples_ms,
    metrics, rounds, ...). Raises RuntimeError / ValueError as the profiler fails."""
    if core in (None, ""):
        raise RuntimeError("no NeuronCore to capture on (the worker's core is unknown)")
    timeout_s = float(timeout_s or os.environ.get("ACCELOPT_NEURON_PROFILE_TIMEOUT_S") or PROFILE_TIMEOUT_S)
    env = _capture_env(core, target)
    counter = [0]

    def warm_once():
        ntff = os.path.join(workdir, f"warm_{uuid.uuid4().hex[:12]}.ntff")
        try:
            _capture(neff, ntff, env, timeout_s)
        finally:
            if os.path.exists(ntff):
                os.unlink(ntff)

    def measure_once():
        # Named as the baremetal mode's timed runs: profile_<index in the round>_<hex>.
        ntff = os.path.join(workdir, f"profile_{counter[0] % 10:02d}_{uuid.uuid4().hex[:12]}.ntff")
        counter[0] += 1
        try:
            _capture(neff, ntff, env, timeout_s)
            return run_profiler(neff, ntff, timeout_s)
        finally:
            if os.path.exists(ntff):
                os.unlink(ntff)

    return benchmark(measure_once, warm_once, perf_tol=PERF_TOL, max_retries=MAX_RETRIES, sleep=sleep)


def _capture_artifacts(scratch, artifacts, core, target, timeout_s, out, paths):
    if len(artifacts) != 1 or set(artifacts[0]) != {"neff"}:
        raise ValueError("timing mode capture expects one NEFF from the worker (ACCELOPT_NEURON_TIMING)")
    neff = _checked_path(scratch, artifacts[0]["neff"], ".neff")
    paths.append(neff)
    workdir = tempfile.mkdtemp(prefix="accelopt-capture-")
    try:
        # The host's own copy: what runs is what was checked.
        copy = os.path.join(workdir, "kernel.neff")
        shutil.copyfile(neff, copy)
        stats = capture_benchmark(copy, core, target, workdir, timeout_s)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out.update(samples_ms=stats["samples_ms"], metrics=stats["metrics"], rounds=stats["rounds"],
               stats={k: stats[k] for k in ("latency_ms", "min_ms", "max_ms", "rel_diffs")})


def _checked_path(scratch, name, suffix):
    if not isinstance(name, str) or not _ARTIFACT_NAME.match(name) or not name.endswith(suffix):
        raise ValueError(f"the worker named an unexpected profile file: {str(name)[:80]!r}")
    path = os.path.join(scratch, name)
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise ValueError(f"the profile file {name} is missing: {exc.strerror}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"the profile file {name} is not a regular file (a link?)")
    if info.st_nlink != 1:
        raise ValueError(f"the profile file {name} has {info.st_nlink} links")
    if info.st_size > MAX_ARTIFACT_BYTES:
        raise ValueError(f"the profile file {name} holds {info.st_size} bytes (limit {MAX_ARTIFACT_BYTES})")
    return path


def profile_artifacts(request):
    """Runs neuron-profile on each NEFF/NTFF pair a worker left in its scratch folder.

    ``request``: {"scratch": folder (str), "artifacts": [{"neff": name,
    "ntff": name}, ...] (file names inside scratch, in run order; timing mode
    "capture": [{"neff": name}]), "core"?: the worker's NeuronCore (capture runs
    there), "target"?: "trn1"|"trn2", "timeout_s"?: per profiler run (s; default
    $ACCELOPT_NEURON_PROFILE_TIMEOUT_S, else PROFILE_TIMEOUT_S = 300)}. The mode is
    the host's (``neuron.timing_mode()``), never the worker's say.

    Returns {"mode", "samples_ms": [latency per run, ms], "metrics": the profile
    fields of the last run (docs/trainium.md), "stats": timing_stats of the
    samples, "rounds"? (capture: the rounds measured here), "error": None} or, when
    a file is missing or malformed or the profiler fails, {"samples_ms": [...so
    far], "error": str, "kind"?: "device_unavailable" when the core was held by
    another process}. The files are removed afterwards either way. Never raises.
    """
    scratch = request.get("scratch") if isinstance(request, dict) else None
    artifacts = request.get("artifacts") if isinstance(request, dict) else None
    timeout_s = float((request.get("timeout_s") if isinstance(request, dict) else None)
                      or os.environ.get("ACCELOPT_NEURON_PROFILE_TIMEOUT_S") or PROFILE_TIMEOUT_S)
    out = {"samples_ms": [], "metrics": {}, "stats": None, "error": None}
    paths = []
    try:
        out["mode"] = mode = timing_mode()
        if not isinstance(scratch, str) or not os.path.isdir(scratch):
            raise ValueError("the worker has no scratch folder to read profiles from")
        if not isinstance(artifacts, list) or not artifacts or len(artifacts) > MAX_ARTIFACTS:
            raise ValueError(f"the worker returned {len(artifacts) if isinstance(artifacts, list) else 'no'} "
                             f"profile runs (expected 1-{MAX_ARTIFACTS})")
        if mode == "capture":
            _capture_artifacts(scratch, artifacts, request.get("core"), request.get("target", "trn1"), timeout_s,
                               out, paths)
            return out
        pairs = []
        for entry in artifacts:
            if not isinstance(entry, dict):
                raise ValueError("malformed profile run entry")
            pair = (_checked_path(scratch, entry.get("neff"), ".neff"), _checked_path(scratch, entry.get("ntff"), ".ntff"))
            paths.extend(pair)
            pairs.append(pair)
        for neff, ntff in pairs:
            latency, metrics = run_profiler(neff, ntff, timeout_s)
            out["samples_ms"].append(latency)
            out["metrics"] = metrics
        out["stats"] = timing_stats(out["samples_ms"])
    except (ValueError, RuntimeError, OSError) as exc:
        out["error"] = str(exc)
        from .neuron_errors import classify
        if classify(exc) == "device_unavailable":
            out["kind"] = "device_unavailable"
    finally:
        for path in paths:
            try:
                os.unlink(path)
            except OSError:
                pass
    return out
