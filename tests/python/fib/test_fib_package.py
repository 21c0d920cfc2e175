"""flashinfer_bench's own data models are the authority on the trace-set format (issue 38, item 2).

The package lives in the PyPI environment (``SETUP_PYPI=1 scripts/setup.sh`` builds ./.venv), so
each check runs ``package_check.py`` under ``.venv/bin/python`` and compares with
``accelopt-host flashinfer validate``:

* the fixture: the package loads it, validate exits 0;
* 14 deliberately broken copies (one defect each, in a definition, solution, workload or trace):
  the package refuses every one and validate exits 2 on every one (our C++ reader may not accept
  what the package refuses);
* a run's own traces, written back into a copy of the fixture by flashinfer-profile, load in the
  package's TraceSet with every trace counted.

Where ./.venv or the host binary is missing there is nothing to compare with; the tests say so
on stdout and return (CI's default set-up does not build the 8.3 GB environment: docs/flashinfer.md).
"""
import json
import os
import shutil
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "flashinfer")
HOST = os.path.join(REPO, "build", "accelopt-host")
VENV_PYTHON = os.path.join(REPO, ".venv", "bin", "python")
CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "package_check.py")

DEFINITION = "definitions/rmsnorm/rmsnorm_h16.json"
SOLUTION = "solutions/fixture_author/rmsnorm/rmsnorm_h16/torch_rmsnorm_py.json"
WORKLOADS = "workloads/rmsnorm/rmsnorm_h16.jsonl"
TRACES = "traces/fixture_author/rmsnorm/rmsnorm_h16.jsonl"


def _available():
    if not (os.path.exists(VENV_PYTHON) and os.path.exists(HOST)):
        print(f"not checked: needs {VENV_PYTHON} (SETUP_PYPI=1 scripts/setup.sh) and {HOST}")
        return False
    probe = subprocess.run([VENV_PYTHON, "-c", "import flashinfer_bench"], capture_output=True)
    if probe.returncode != 0:
        print("not checked: the PyPI environment has no flashinfer_bench")
        return False
    return True


def _package_load(*paths):
    """package_check.py's verdict per path (one interpreter for all of them)."""
    done = subprocess.run([VENV_PYTHON, CHECK, *paths], capture_output=True, encoding="utf-8", errors="replace",
                          check=True)
    verdicts = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert len(verdicts) == len(paths), done.stdout + done.stderr
    return verdicts if len(paths) > 1 else verdicts[0]


def _host_validate(path):
    return subprocess.run([HOST, "flashinfer", "validate", path, "--errors-only"], capture_output=True, encoding="utf-8",
                          errors="replace")


def _edit_json(relative, change):
    def apply(root):
        path = os.path.join(root, relative)
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        change(data)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
    return apply


def _edit_jsonl_first(relative, change):
    def apply(root):
        path = os.path.join(root, relative)
        with open(path, encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
        change(rows[0])
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("\n".join(json.dumps(row) for row in rows) + "\n")
    return apply


BREAKS = {
    "unknown dtype": _edit_json(DEFINITION, lambda d: d["inputs"]["hidden_states"].update(dtype="bfloat15")),
    "no reference": _edit_json(DEFINITION, lambda d: d.pop("reference")),
    "unknown axis type": _edit_json(DEFINITION, lambda d: d["axes"]["batch_size"].update(type="dynamic")),
    "shape names no axis": _edit_json(DEFINITION, lambda d: d["inputs"]["weight"].update(shape=["nope"])),
    "empty definition name": _edit_json(DEFINITION, lambda d: d.update(name="")),
    "unknown language": _edit_json(SOLUTION, lambda d: d["spec"].update(language="rust")),
    "no sources": _edit_json(SOLUTION, lambda d: d.update(sources=[])),
    "entry point without function": _edit_json(SOLUTION, lambda d: d["spec"].update(entry_point="main.py")),
    "absolute source path": _edit_json(SOLUTION, lambda d: d["sources"][0].update(path="/etc/main.py")),
    "DPS flag not a bool": _edit_json(SOLUTION, lambda d: d["spec"].update(destination_passing_style="maybe")),
    "negative axis value": _edit_jsonl_first(WORKLOADS, lambda r: r["workload"]["axes"].update(batch_size=-1)),
    "unknown input type": _edit_jsonl_first(WORKLOADS, lambda r: r["workload"]["inputs"]["weight"].update(type="zeros")),
    "unknown trace status": _edit_jsonl_first(TRACES, lambda r: r["evaluation"].update(status="GREAT")),
    "trace workload without uuid": _edit_jsonl_first(TRACES, lambda r: r["workload"].pop("uuid")),
}


def test_package_loads_the_fixture_and_validate_agrees():
    if not _available():
        return
    loaded = _package_load(FIXTURE)
    assert loaded["ok"], loaded
    assert loaded["definitions"] == ["fused_add_rmsnorm_h16", "gemm_n8_k16", "rmsnorm_h16", "scale_add_n8"]
    assert loaded["traces"] == 5
    validated = _host_validate(FIXTURE)
    assert validated.returncode == 0, validated.stdout + validated.stderr


def test_every_broken_copy_is_refused_by_the_package_and_by_validate():
    if not _available():
        return
    with tempfile.TemporaryDirectory() as tmp:
        roots = {}
        for name, apply in BREAKS.items():
            roots[name] = os.path.join(tmp, name.replace(" ", "_"))
            shutil.copytree(FIXTURE, roots[name])
            apply(roots[name])
        verdicts = dict(zip(roots, _package_load(*roots.values())))
        disagreements = []
        for name, root in roots.items():
            package = verdicts[name]
            host = _host_validate(root)
            if package["ok"] or host.returncode != 2:
                disagreements.append(f"{name}: package {'accepts' if package['ok'] else 'refuses'}, "
                                     f"validate exit {host.returncode}")
        assert not disagreements, disagreements


def test_a_runs_traces_load_in_the_package():
    if not _available():
        return
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "set")
        shutil.copytree(FIXTURE, copy)
        run = subprocess.run([HOST, "run", os.path.join(REPO, "pipelines", "flashinfer-profile.yaml"),
                              "--run-dir", os.path.join(tmp, "run"), "--set", "vars.trace_set=" + copy,
                              "--set", "vars.write_back=true", "--set", "vars.trials=1", "--set", "vars.warmup=1",
                              "--set", "vars.iterations=2"],
                             capture_output=True, encoding="utf-8", errors="replace",  # the log has UTF-8 arrows
                             env=dict(os.environ, ACCELOPT_NO_PROGRESS="1"))
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        loaded = _package_load(copy)
        assert loaded["ok"], loaded
        # The fixture's 5 traces plus the run's: 3 PASSED + 3 INCORRECT_NUMERICAL for rmsnorm_h16 at least.
        assert loaded["traces"] >= 5 + 6, loaded
        assert _host_validate(copy).returncode == 0
