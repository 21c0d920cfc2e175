"""flashinfer_bench's own data models (scripts/setup_pypi.sh installs the package) accept the
fixture trace set, and refuse a deliberately broken copy; `accelopt-host flashinfer validate`
must agree on both (issue 38 item 2). Without the package the test has nothing to check."""
import json
import os
import shutil
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "flashinfer")
HOST = os.path.join(REPO, "build", "accelopt-host")


def _package():
    try:
        import flashinfer_bench  # noqa: F401
        from flashinfer_bench import TraceSet
    except ImportError:
        return None
    return TraceSet


def _host_validate(path):
    if not os.path.exists(HOST):
        return None
    return subprocess.run([HOST, "flashinfer", "validate", path], capture_output=True, text=True).returncode


def test_package_trace_set_loads_fixture_and_host_agrees():
    TraceSet = _package()
    if TraceSet is None:
        return
    trace_set = TraceSet.from_path(FIXTURE)
    assert len(trace_set.definitions) == 4
    assert _host_validate(FIXTURE) in (None, 0)


def test_package_and_host_refuse_broken_copy():
    TraceSet = _package()
    if TraceSet is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        broken = os.path.join(tmp, "set")
        shutil.copytree(FIXTURE, broken)
        path = os.path.join(broken, "definitions", "rmsnorm", "rmsnorm_h16.json")
        with open(path, encoding="utf-8") as handle:
            definition = json.load(handle)
        definition["inputs"]["hidden_states"]["dtype"] = "bfloat15"
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(definition, handle)
        refused = False
        try:
            loaded = TraceSet.from_path(broken)
            refused = "rmsnorm_h16" not in loaded.definitions
        except Exception:  # noqa: BLE001 - the package's validation error
            refused = True
        assert refused
        assert _host_validate(broken) in (None, 2)
