"""The trusted half of hardware timing: neuron-profile on what a worker left behind.

A sandboxed candidate on the neuron backend compiles and runs its kernel and
leaves one NEFF/NTFF pair per timed run in its worker's scratch folder
(NeuronBackend.save_profile_runs). The host, while it still holds that
worker (nothing in its sandbox runs any more), checks the files and runs
``neuron-profile`` on each pair here, in its own process: the candidate never
needs to start a program, and the profiler's answer never passes through
candidate code (docs/trainium.md).
"""
import os
import re
import stat

from .neuron import PROFILE_TIMEOUT_S, run_profiler, timing_stats

# The names NeuronBackend.save_profile_runs gives its files; anything else is refused.
_ARTIFACT_NAME = re.compile(r"^profile_[0-9]{2}_[0-9a-f]{12}\.(neff|ntff)$")
# A NEFF or NTFF larger than this is refused rather than handed to the profiler (bytes).
MAX_ARTIFACT_BYTES = 8 << 30
MAX_ARTIFACTS = 64


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
    "ntff": name}, ...] (file names inside scratch, in run order),
    "timeout_s"?: per profiler run (s; default $ACCELOPT_NEURON_PROFILE_TIMEOUT_S,
    else PROFILE_TIMEOUT_S = 300)}.

    Returns {"samples_ms": [latency per run, ms], "metrics": the profile
    fields of the last run (docs/trainium.md), "stats": timing_stats of the
    samples, "error": None} or, when a file is missing or malformed or the
    profiler fails, {"samples_ms": [...so far], "error": str}. The files
    are removed afterwards either way. Never raises.
    """
    scratch = request.get("scratch") if isinstance(request, dict) else None
    artifacts = request.get("artifacts") if isinstance(request, dict) else None
    timeout_s = float((request.get("timeout_s") if isinstance(request, dict) else None)
                      or os.environ.get("ACCELOPT_NEURON_PROFILE_TIMEOUT_S") or PROFILE_TIMEOUT_S)
    out = {"samples_ms": [], "metrics": {}, "stats": None, "error": None}
    paths = []
    try:
        if not isinstance(scratch, str) or not os.path.isdir(scratch):
            raise ValueError("the worker has no scratch folder to read profiles from")
        if not isinstance(artifacts, list) or not artifacts or len(artifacts) > MAX_ARTIFACTS:
            raise ValueError(f"the worker returned {len(artifacts) if isinstance(artifacts, list) else 'no'} "
                             f"profile runs (expected 1-{MAX_ARTIFACTS})")
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
    finally:
        for path in paths:
            try:
                os.unlink(path)
            except OSError:
                pass
    return out
