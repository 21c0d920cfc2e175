"""The neuron backend's host-side pieces against the stand-in SDK (tests/fixtures/README.md).

Anything that puts the stand-in on sys.path runs in a child interpreter:
these tests share the embedded interpreter with the rest of the suite, which
must keep seeing no Neuron SDK.
"""
import json
import os
import subprocess
import sys
import tempfile

from accelopt import nkibench
from accelopt.backends import choose_backend, neuron_cores
from accelopt.backends.device_profile import profile_artifacts
from accelopt.sandbox import hardware_profile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HOST_PYTHON = os.path.join(REPO, "host", "python")
SDK = os.path.join(REPO, "tests", "fixtures", "neuron_sdk")
SDK_228 = os.path.join(REPO, "tests", "fixtures", "neuron_sdk_228")
STANDIN_BIN = os.path.join(SDK, "bin")


def _child(code, paths, env=None):
    """Runs ``code`` in a fresh interpreter with ``paths`` first on sys.path; returns its last stdout line as JSON."""
    prelude = f"import sys, json; sys.path[:0] = {[HOST_PYTHON] + paths!r}\n"
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, env=full_env,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_auto_finds_either_namespace_and_its_version():
    code = "from accelopt.backends import choose_backend; print(json.dumps(choose_backend('auto')))"
    old = _child(code, [SDK])
    assert old["backend"] == "neuron" and old["namespace"] == "neuronxcc.nki"
    assert old["sdk_version"] == "2.21.0+standin" and "neuronxcc" in old["reason"]
    new = _child(code, [SDK_228, SDK])
    assert new["namespace"] == "nki" and new["sdk_version"] == "2.28.0+standin"


def test_the_emulator_never_counts_as_the_sdk():
    import nki_emu
    nki_emu.install()  # neuronxcc and nki now name the emulator in this interpreter
    choice = choose_backend("auto")
    assert choice["backend"] == "emulator" and "no Neuron SDK" in choice["reason"]
    assert choose_backend("neuron")["backend"] == "neuron"  # asked for: the worker then reports what is missing
    assert choose_backend("emulator")["reason"] == "the emulator was requested"


def test_trn2_tells_either_namespace_its_platform():
    code = """
from accelopt.backends.neuron import NeuronBackend
backend = NeuronBackend("trn2")
try:
    backend.prepare()
    print(json.dumps({"ok": True, "options": backend._options}))
except RuntimeError as exc:
    print(json.dumps({"ok": False, "error": str(exc)}))
"""
    # Both layouts are told the platform: neuronxcc.nki.baremetal by keyword (it takes
    # **kwargs), SDK 2.28's nki by NEURON_PLATFORM_TARGET_OVERRIDE (set in prepare).
    old = _child(code, [SDK])
    assert old["ok"] and old["options"]["platform_target"] == "trn2", old
    new = _child(code, [SDK_228, SDK])
    assert new["ok"] and new["options"]["platform_target"] == "trn2", new


def test_prepare_refuses_without_an_sdk():
    from accelopt.backends.neuron import NeuronBackend
    try:
        NeuronBackend("trn1").prepare()
    except RuntimeError as exc:
        assert "no Neuron SDK" in str(exc)
    else:
        raise AssertionError("prepare() accepted a process without the SDK")


def test_core_lists_and_neuron_ls():
    assert neuron_cores.parse_core_list("0-3,6") == [0, 1, 2, 3, 6]
    assert neuron_cores.parse_core_list("5") == [5]
    for bad in ("", "a", "3-1", "-1", "0,,1"):
        try:
            neuron_cores.parse_core_list(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")
    listing = json.dumps([{"neuron_device": 1, "nc_count": 2}, {"neuron_device": 0, "nc_count": 8}])
    assert neuron_cores.parse_neuron_ls(listing) == list(range(10))
    for bad in ("[]", json.dumps([{"neuron_device": 0}])):
        try:
            neuron_cores.parse_neuron_ls(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")
    configured = neuron_cores.discover("2-3")
    assert configured["cores"] == [2, 3] and configured["source"] == "configured (2-3)", configured
    found = _child("from accelopt.backends import neuron_cores; print(json.dumps(neuron_cores.discover()))", [],
                   {"PATH": STANDIN_BIN + os.pathsep + os.environ.get("PATH", ""), "STANDIN_NEURON_DEVICES": "3",
                    "ACCELOPT_NEURON_CORES": ""})
    assert found["cores"] == list(range(6)) and "neuron-ls" in found["source"]
    missing = _child("""
from accelopt.backends import neuron_cores
try:
    neuron_cores.discover()
    print(json.dumps("found"))
except RuntimeError as exc:
    print(json.dumps(str(exc)))
""", [], {"PATH": "/nonexistent", "ACCELOPT_NEURON_CORES": "", "ACCELOPT_NEURON_ROOT": "/nonexistent"})
    assert "neuron-ls not found" in missing and "--neuron-cores" in missing


def _artifact_pair(folder, index, device_s=1e-4):
    stem = f"profile_{index:02d}_{index:012x}"
    with open(os.path.join(folder, stem + ".neff"), "w", encoding="utf-8") as handle:
        json.dump({"standin_neff": 1}, handle)
    with open(os.path.join(folder, stem + ".ntff"), "w", encoding="utf-8") as handle:
        json.dump({"device_time_s": device_s, "hbm_read_bytes": 10, "hbm_write_bytes": 20}, handle)
    return {"neff": stem + ".neff", "ntff": stem + ".ntff"}


class _BaremetalTiming:
    """AccelOpt's own timing protocol (one NEFF/NTFF pair per timed run, neuron-profile view on
    each): the mode these tests check; the default mode, capture, has test_neuron_228."""

    def __enter__(self):
        self.saved = os.environ.get("ACCELOPT_NEURON_TIMING")
        os.environ["ACCELOPT_NEURON_TIMING"] = "baremetal"

    def __exit__(self, *exc):
        if self.saved is None:
            os.environ.pop("ACCELOPT_NEURON_TIMING", None)
        else:
            os.environ["ACCELOPT_NEURON_TIMING"] = self.saved


def _with_standin_profiler(fn):
    saved = os.environ.get("PATH", "")
    os.environ["PATH"] = STANDIN_BIN + os.pathsep + saved
    try:
        return fn()
    finally:
        os.environ["PATH"] = saved


def test_profile_artifacts_measures_and_removes_the_files():
    with _BaremetalTiming():
        with tempfile.TemporaryDirectory() as scratch:
            pairs = [_artifact_pair(scratch, i, 1e-4 * (i + 1)) for i in range(3)]
            out = _with_standin_profiler(lambda: profile_artifacts({"scratch": scratch, "artifacts": pairs}))
            assert out["error"] is None, out
            assert [round(v, 9) for v in out["samples_ms"]] == [0.1, 0.2, 0.3]
            assert out["metrics"]["hbm_write_bytes"] == 20.0 and abs(out["stats"]["rel_diffs"] - 2.0) < 1e-9
            assert os.listdir(scratch) == []


def test_profile_artifacts_refuses_what_a_candidate_could_plant():
    with _BaremetalTiming():
        def plant_link(scratch, good):
            os.symlink("/etc/passwd", os.path.join(scratch, "profile_01_000000000001.ntff"))
            return [{"neff": good["neff"], "ntff": "profile_01_000000000001.ntff"}]

        def plant_hard_link(scratch, good):
            os.link(os.path.join(scratch, good["ntff"]), os.path.join(scratch, "profile_02_000000000002.ntff"))
            return [{"neff": good["neff"], "ntff": "profile_02_000000000002.ntff"}]

        cases = [
            (lambda scratch, good: [{"neff": "../x.neff", "ntff": good["ntff"]}], "unexpected profile file"),
            (plant_link, "not a regular file"),
            (plant_hard_link, "has 2 links"),
            (lambda scratch, good: [{"neff": "profile_03_000000000003.neff", "ntff": good["ntff"]}], "missing"),
            (lambda scratch, good: [], "profile runs"),
            (lambda scratch, good: [good] * 65, "profile runs"),
        ]
        for plant, expected in cases:
            with tempfile.TemporaryDirectory() as scratch:
                good = _artifact_pair(scratch, 0)
                artifacts = plant(scratch, good)
                out = profile_artifacts({"scratch": scratch, "artifacts": artifacts})
                assert out["error"] and expected in out["error"], (expected, out)
                assert out["samples_ms"] == []
        out = profile_artifacts({"scratch": "/nonexistent", "artifacts": [{"neff": "a", "ntff": "b"}]})
        assert "no scratch folder" in out["error"]


def test_profiler_failure_and_timeout_are_reported():
    with _BaremetalTiming():
        with tempfile.TemporaryDirectory() as scratch:
            os.environ["STANDIN_PROFILE_FAIL"] = "1"
            try:
                out = _with_standin_profiler(lambda: profile_artifacts({"scratch": scratch,
                                                                        "artifacts": [_artifact_pair(scratch, 0)]}))
            finally:
                del os.environ["STANDIN_PROFILE_FAIL"]
            assert "neuron-profile failed (2)" in out["error"] and "STANDIN_PROFILE_FAIL" in out["error"]
            os.environ["STANDIN_PROFILE_SLEEP"] = "5"
            try:
                out = _with_standin_profiler(lambda: profile_artifacts({"scratch": scratch, "timeout_s": 0.5,
                                                                        "artifacts": [_artifact_pair(scratch, 1)]}))
            finally:
                del os.environ["STANDIN_PROFILE_SLEEP"]
            assert "ran past 0.5 s" in out["error"]
            assert os.listdir(scratch) == []


def test_published_tolerances_apply_unless_the_folder_sets_one():
    with tempfile.TemporaryDirectory() as root:
        summary = {name: {"seed": "s.yaml", "cases": {"1": {"values": {}, "impls": [{"task": "t.py", "kernel": "k.py"}]}}}
                   for name in ("mamba", "silu")}
        summary["silu"]["rel_tol"] = 1e-4
        with open(os.path.join(root, "summary.json"), "w", encoding="utf-8") as handle:
            json.dump(summary, handle)
        tolerances = {case.problem: case.rel_tol for case in nkibench.iter_cases(root)}
    assert tolerances == {"mamba": 3e-5, "silu": 1e-4}


def test_hardware_profile_paths():
    paths = hardware_profile.neuron_paths(os.path.join(SDK, "neuronxcc", "__init__.py"))
    assert os.path.join(SDK, "neuronxcc") in paths["exec"]
    assert "/usr/bin" not in paths["exec"] and "/usr" not in paths["exec"]  # never every program on the system
    assert any("ld-linux" in p for p in paths["exec"]), paths["exec"]
    assert "/sys" in paths["read"] and all(not p.startswith("/proc") for p in paths["read"])
    os.environ["ACCELOPT_SANDBOX_READ"] = SDK_228 + ":/nonexistent"
    try:
        assert hardware_profile.extra_paths()["read"] == [SDK_228]
    finally:
        del os.environ["ACCELOPT_SANDBOX_READ"]


def test_gpu_lists_and_nvidia_smi():
    from accelopt.backends import gpus
    assert gpus.parse_nvidia_smi("1\n0\n\n") == [0, 1]
    for bad in ("", "GPU 0"):
        try:
            gpus.parse_nvidia_smi(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")
    assert gpus.discover("2,3") == {"gpus": [2, 3], "source": "configured (2,3)"}
    standin = os.path.join(REPO, "tests", "fixtures", "gpu", "bin")
    found = _child("from accelopt.backends import gpus; print(json.dumps(gpus.discover('auto')))", [],
                   {"PATH": standin + os.pathsep + os.environ.get("PATH", ""), "STANDIN_GPUS": "3"})
    assert found["gpus"] == [0, 1, 2] and "nvidia-smi" in found["source"]
