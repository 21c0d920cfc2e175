"""accelopt.fib.gpu without a GPU: a stand-in for accelopt-fib-cuda-run that speaks its file
protocol (request JSON, input/output .bin files, one JSON line) checks the host side: inputs
written in the DLPack dtype codes, outputs of the first and last calls read back and judged,
input mutation, "no device" (docs/flashinfer.md)."""
import json
import os
import stat
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "flashinfer")

# A stand-in runner: C = A @ B.T in fp16 (the fixture's GEMM), optionally wrong after timing,
# optionally touching an input, or answering "no device".
_RUNNER = r'''#!/usr/bin/python3.11
import json, sys
import numpy as np
mode = MODE
req = json.load(open(sys.argv[1]))
if mode == "nodevice":
    print(json.dumps({"status": "no_device", "message": "no CUDA driver (stand-in)"}))
    sys.exit(3)
args = req["args"]
assert [(a.get("code"), a.get("bits")) for a in args] == [(2, 16)] * 3, args
a = np.fromfile(args[0]["file"], dtype=np.float16).reshape(args[0]["shape"])
b = np.fromfile(args[1]["file"], dtype=np.float16).reshape(args[1]["shape"])
c = (a.astype(np.float32) @ b.astype(np.float32).T).astype(np.float16)
c.tofile(req["out_dir"] + "/first_2.bin")
(c * 0 if mode == "late" else c).tofile(req["out_dir"] + "/after_2.bin")
a.tofile(req["out_dir"] + "/input_after_0.bin")
(b + 1 if mode == "mutate" else b).tofile(req["out_dir"] + "/input_after_1.bin")
print(json.dumps({"status": "ok", "median_ms": 0.0123, "samples_ms": [0.0123], "name": "Stand-in GPU"}))
'''


def _session():
    from accelopt.fib import evaluate
    with open(os.path.join(FIXTURE, "definitions/gemm/gemm_n8_k16.json"), encoding="utf-8") as handle:
        definition = handle.read()
    with open(os.path.join(FIXTURE, "workloads/gemm/gemm_n8_k16.jsonl"), encoding="utf-8") as handle:
        workload = json.loads(handle.readline())["workload"]  # the safetensors workload
    opened = evaluate.open_workload({"definition_text": definition, "workload": workload, "root": FIXTURE,
                                     "seed": 0, "trials": 2, "timing": {"warmup": 1, "iterations": 2,
                                                                        "cold_cache": False}})
    for t in range(2):
        assert evaluate.trial({"baseline": opened["baseline"], "trial": t, "role": "reference"})["status"] == "OK"
    return opened["baseline"]


def _runner(folder, mode):
    path = os.path.join(folder, f"runner_{mode}")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(_RUNNER.replace("MODE", repr(mode)))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def test_cuda_runner_protocol_is_judged_like_the_cpu_tier():
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    from accelopt.fib import evaluate, gpu
    baseline = _session()
    try:
        with tempfile.TemporaryDirectory() as folder:
            def run(mode):
                return gpu.run_cuda({"baseline": baseline, "trials": 2, "runner": _runner(folder, mode),
                                     "library": "unused.so", "symbol": "accelopt_fib_export_run", "dps": True,
                                     "timeout_s": 60, "dir": os.path.join(folder, "run_" + mode)})
            good = run("good")["verdicts"]
            assert [v["status"] for v in good] == ["PASSED", "PASSED"], good
            assert good[0]["median_ms"] == 0.0123 and good[0]["max_absolute_error"] == 0.0
            late = run("late")["verdicts"]
            assert late[0]["status"] == "INCORRECT_NUMERICAL" and "after timing" in late[0]["log"]
            mutate = run("mutate")["verdicts"]
            assert mutate[0]["status"] == "RUNTIME_ERROR" and "modified input" in mutate[0]["log"]
            none = run("nodevice")
            assert none["verdicts"] == [] and "stand-in" in none["no_device"]
            value = gpu.run_cuda({"baseline": baseline, "trials": 1, "runner": "/bin/false", "library": "x",
                                  "symbol": "y", "dps": False, "dir": folder})
            assert value["verdicts"][0]["status"] == "RUNTIME_ERROR"  # the shim has no value-returning binding
    finally:
        evaluate.close_workload({"baseline": baseline})


def test_no_gpu_python_is_reported_not_faked():
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    from accelopt.fib import gpu
    saved, gpu._probe = gpu._probe, None
    old = os.environ.get("ACCELOPT_FIB_GPU_PYTHON")
    os.environ["ACCELOPT_FIB_GPU_PYTHON"] = "/bin/false"
    try:
        found = gpu.gpu_python()
        if "python" in found:  # a real GPU python on PATH: nothing to check here
            return
        assert "/bin/false: no torch with triton" in found["reason"]
        out = gpu.run_triton({"baseline": "none", "trials": 1, "solution": {}})
        assert out["ran"] is False and "no GPU python" in out["reason"]
    finally:
        gpu._probe = saved
        if old is None:
            os.environ.pop("ACCELOPT_FIB_GPU_PYTHON", None)
        else:
            os.environ["ACCELOPT_FIB_GPU_PYTHON"] = old


def test_gpu_worker_protocol_on_cpu():
    """gpu_worker.py (the GPU python's side) with ACCELOPT_FIB_GPU_DEVICE=cpu: the reference and a
    DPS solution go through the request/response files and are judged like GPU trials."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    from accelopt.fib import evaluate, gpu
    from accelopt.fib import trusted as T
    with open(os.path.join(FIXTURE, "definitions/rmsnorm/rmsnorm_h16.json"), encoding="utf-8") as handle:
        definition = handle.read()
    with open(os.path.join(FIXTURE, "workloads/rmsnorm/rmsnorm_h16.jsonl"), encoding="utf-8") as handle:
        workload = json.loads(handle.readlines()[1])["workload"]
    opened = evaluate.open_workload({"definition_text": definition, "workload": workload, "root": FIXTURE, "seed": 1,
                                     "trials": 1, "timing": {"warmup": 1, "iterations": 2, "cold_cache": False}})
    session = T.session(opened["baseline"])
    old = os.environ.get("ACCELOPT_FIB_GPU_DEVICE")
    os.environ["ACCELOPT_FIB_GPU_DEVICE"] = "cpu"
    try:
        reply, first, _after, _ = gpu._gpu_trial("/usr/bin/python3.11", session, 0, "reference", None, False, False,
                                                 120, True)
        assert reply["status"] == "ok", reply
        session["trials"][0]["gpu_reference"] = T.normalize_outputs(first, session["outputs"])
        with open(os.path.join(FIXTURE, "solutions/fixture_author/rmsnorm/rmsnorm_h16/wrong_rmsnorm_dps.json"),
                  encoding="utf-8") as handle:
            wrong = json.load(handle)
        reply, first, after, digests = gpu._gpu_trial("/usr/bin/python3.11", session, 0, "solution", wrong, True,
                                                       True, 120, True)
        assert reply["status"] == "ok" and reply["dps"] is True and reply["median_ms"] > 0, reply
        verdict = gpu._judge(session, 0, first, after, digests, reply["median_ms"], reply["log"])
        assert verdict["status"] == "INCORRECT_NUMERICAL"
        broken = dict(wrong, sources=[{"path": "main.py", "content": "def run(:\n"}])
        reply, *_ = gpu._gpu_trial("/usr/bin/python3.11", session, 0, "solution", broken, True, True, 120, True)
        assert reply["status"] == "compile_error"
    finally:
        evaluate.close_workload({"baseline": opened["baseline"]})
        if old is None:
            os.environ.pop("ACCELOPT_FIB_GPU_DEVICE", None)
        else:
            os.environ["ACCELOPT_FIB_GPU_DEVICE"] = old
