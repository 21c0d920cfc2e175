"""accelopt.fib against hostile trace sets and solutions (issue 34): names that
would become path components, workloads whose axes ask the host for more
memory than it may give, solutions that cache their result between timed
calls (docs/flashinfer.md, "Hostile trace sets and solutions")."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "flashinfer")

# (name, safe?) shared with tests/host/flashinfer/names_test.cc: one rule in C++ and Python.
NAME_CASES = [
    ("rmsnorm_h16", True), ("gpt-o3_triton_4c9c32", True), ("claude-opus-4.1_cuda_0a1b2c", True),
    ("AccelOpt", True), ("a+b", True), ("x" * 128, True),
    ("", False), ("..", False), (".", False), ("a..b", False), ("../escape", False), ("/etc/passwd", False),
    ("a/b", False), ("a\\b", False), ("nul\x00byte", False), (".hidden", False), ("-rf", False),
    ("new\nline", False), ("sp ace", False), ("x" * 129, False), ("caf\u00e9", False),
]


def _torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    return torch


def _definition(rel):
    with open(os.path.join(FIXTURE, rel), encoding="utf-8") as handle:
        return json.load(handle)


def _workload(rel, index=0):
    with open(os.path.join(FIXTURE, rel), encoding="utf-8") as handle:
        return [json.loads(line)["workload"] for line in handle if line.strip()][index]


def test_names_are_checked_before_they_become_path_components():
    from accelopt.fib import names
    for name, safe in NAME_CASES:
        problem = names.problem(name)
        assert (problem is None) == safe, (name, problem)
        if safe:
            assert names.component(name, "author") == name
        else:
            try:
                names.component(name, "solution.author")
            except ValueError as exc:
                assert "solution.author" in str(exc)
            else:
                raise AssertionError(f"{name!r} was accepted")
    for bad in (None, 3, b"bytes"):
        assert names.problem(bad) is not None


def test_a_huge_axis_is_refused_before_anything_is_allocated():
    """batch_size=1e8 on rmsnorm_h16 asks for 19.2 GB (3 trials x (3.2 GB in + 3.2 GB out)): refused
    with the workload and the axis named, in a process that could not allocate that much anyway."""
    if _torch() is None:
        return
    d = _definition("definitions/rmsnorm/rmsnorm_h16.json")
    w = dict(_workload("workloads/rmsnorm/rmsnorm_h16.jsonl"), axes={"batch_size": 100_000_000})
    script = (
        "import json, resource, sys\n"
        f"sys.path.insert(0, {os.path.join(REPO, 'host', 'python')!r})\n"
        "import torch\n"
        "from accelopt.fib import evaluate\n"
        "with open('/proc/self/status') as f:\n"
        "    vm = [int(l.split()[1]) * 1024 for l in f if l.startswith('VmSize:')][0]\n"
        "resource.setrlimit(resource.RLIMIT_AS, (vm + (1 << 30), vm + (1 << 30)))\n"  # 1 GiB of headroom
        "arg = json.loads(sys.stdin.read())\n"
        "try:\n"
        "    out = evaluate.open_workload(arg)\n"
        "except BaseException as exc:\n"
        "    out = {'raised': f'{type(exc).__name__}: {exc}'[:300]}\n"
        "print(json.dumps(out))\n")
    arg = {"definition_text": json.dumps(d), "workload": w, "root": FIXTURE, "seed": 0, "trials": 3,
           "timing": {"warmup": 1, "iterations": 1, "cold_cache": False}}
    done = subprocess.run(["/usr/bin/python3.11", "-c", script], input=json.dumps(arg), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" in out, out
    message = out["error"]
    assert w["uuid"] in message and "batch_size" in message and "100000000" in message, message
    assert "max_workload_bytes" in message, message  # says how to raise the cap


def test_the_workload_cap_is_configurable_and_counts_every_trial():
    if _torch() is None:
        return
    from accelopt.fib import evaluate
    d = _definition("definitions/rmsnorm/rmsnorm_h16.json")
    w = dict(_workload("workloads/rmsnorm/rmsnorm_h16.jsonl"), axes={"batch_size": 1024})
    # One trial: 1024 x 16 bf16 in and out = 64 KiB, the weight 32 B, and 64 KiB of float32 to draw x.
    base = {"definition_text": json.dumps(d), "workload": w, "root": FIXTURE, "seed": 0,
            "timing": {"warmup": 1, "iterations": 1, "cold_cache": False}}
    small = evaluate.open_workload(dict(base, trials=1, max_workload_bytes=2 * 64 * 1024 + 32))
    assert "baseline" in small, small
    evaluate.close_workload({"baseline": small["baseline"]})
    refused = evaluate.open_workload(dict(base, trials=2, max_workload_bytes=2 * 64 * 1024 + 32))
    assert "error" in refused and "batch_size = 1024" in refused["error"], refused
    from accelopt.fib import inputs
    assert 0 < inputs.default_workload_bytes() <= 8 << 30
    # Blob inputs count like drawn ones (A 4x16 + B 8x16 + C 4x8 float16 = 448 bytes), and only the
    # needed tensor's bytes are read from the file.
    g = _definition("definitions/gemm/gemm_n8_k16.json")
    wl = _workload("workloads/gemm/gemm_n8_k16.jsonl", 0)
    assert all(v.get("type") == "safetensors" for v in wl["inputs"].values()), wl
    arg = {"definition_text": json.dumps(g), "workload": wl, "root": FIXTURE, "seed": 0, "trials": 1,
           "timing": {"warmup": 1, "iterations": 1, "cold_cache": False}}
    fits = evaluate.open_workload(dict(arg, max_workload_bytes=448))
    assert "baseline" in fits, fits
    evaluate.close_workload({"baseline": fits["baseline"]})
    blob = evaluate.open_workload(dict(arg, max_workload_bytes=447))
    assert "error" in blob and wl["uuid"] in blob["error"] and "M = 4" in blob["error"], blob


_RMS = ("import torch\n\n"
        "def _rms(x, w):\n"
        "    x32 = x.float()\n"
        "    return (x32 * torch.rsqrt(x32.square().mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)\n")


def _solution(name, code):
    return {"name": name, "definition": "rmsnorm_h16", "author": "tests",
            "spec": {"language": "python", "entry_point": "main.py::run", "target_hardware": ["cpu"]},
            "sources": [{"path": "main.py", "content": code}]}


def _median(evaluate, base, solution, trials=1, dps=None):
    times = []
    for t in range(trials):
        v = evaluate.trial({"baseline": base, "trial": t, "role": "solution", "solution": solution, "dps": dps})
        if v["status"] != "PASSED":
            return v
        times.append(v["median_ms"])
    return sum(times) / len(times)


def test_a_solution_that_memoizes_on_data_ptr_is_not_timed_faster():
    """The attack of issue 34: a cache keyed on the inputs' data_ptr() returned the first call's
    result to every timed call (45x). Every warm-up and timed call now gets fresh inputs (the same
    values at an address no earlier call of the trial saw), so the cache never hits; a cache that
    hands back the very same tensor object is refused; DPS outputs are poisoned before each call."""
    torch = _torch()
    if torch is None:
        return
    from accelopt.fib import evaluate
    d = _definition("definitions/rmsnorm/rmsnorm_h16.json")
    w = dict(_workload("workloads/rmsnorm/rmsnorm_h16.jsonl"), axes={"batch_size": 256})
    opened = evaluate.open_workload({"definition_text": json.dumps(d), "workload": w, "root": FIXTURE, "seed": 1,
                                     "trials": 2, "timing": {"warmup": 3, "iterations": 15, "cold_cache": False}})
    base = opened["baseline"]
    try:
        for t in range(2):
            assert evaluate.trial({"baseline": base, "trial": t, "role": "reference"})["status"] == "OK"
        honest = _solution("honest", _RMS + "\ndef run(x, w):\n    return _rms(x, w)\n")
        memo = _solution("memo", _RMS + "\n_seen = {}\n\ndef run(x, w):\n"
                                        "    key = (x.data_ptr(), w.data_ptr())\n"
                                        "    if key not in _seen:\n"
                                        "        _seen[key] = _rms(x, w)\n"
                                        "    return _seen[key]\n")
        honest_ms = _median(evaluate, base, honest)
        memo_ms = _median(evaluate, base, memo)
        assert isinstance(honest_ms, float), honest_ms
        # Before: memo_ms was a dict lookup, honest_ms / memo_ms ~ 20-50x.
        if isinstance(memo_ms, float):
            assert honest_ms / memo_ms < 3.0, (honest_ms, memo_ms)
        else:
            assert memo_ms["status"] == "RUNTIME_ERROR" and "anti-cheat" in memo_ms["log"], memo_ms
        # A cache keyed on something that stays the same (a value) returns the same object: refused.
        same = _solution("same", _RMS + "\n_cache = []\n\ndef run(x, w):\n"
                                        "    if not _cache:\n"
                                        "        _cache.append(_rms(x, w))\n"
                                        "    return _cache[0]\n")
        v = evaluate.trial({"baseline": base, "trial": 0, "role": "solution", "solution": same})
        assert v["status"] == "RUNTIME_ERROR" and "same tensor object" in v["log"], v
        # DPS: a call that writes nothing after the first one left the right answer in `out`.
        skip = _solution("skip", _RMS + "\n_calls = [0]\n\ndef run(x, w, out):\n"
                                        "    _calls[0] += 1\n"
                                        "    if _calls[0] == 1:\n"
                                        "        out.copy_(_rms(x, w))\n")
        v = evaluate.trial({"baseline": base, "trial": 0, "role": "solution", "solution": skip, "dps": True})
        assert v["status"] != "PASSED" and "after timing" in v["log"], v
        ok_dps = _solution("ok_dps", _RMS + "\ndef run(x, w, out):\n    out.copy_(_rms(x, w))\n")
        assert isinstance(_median(evaluate, base, ok_dps, dps=True), float)
    finally:
        evaluate.close_workload({"baseline": base})


def test_fresh_inputs_have_new_addresses_and_the_same_values():
    torch = _torch()
    if torch is None:
        return
    from accelopt.fib import untrusted
    x = torch.randn(4, 16).to(torch.bfloat16)
    w = torch.randn(16)
    fresh = untrusted.FreshInputs([x, 2.5, w], calls=6)
    seen = {x.data_ptr(), w.data_ptr()}
    for i in range(6):
        args = fresh.call(i)
        assert args[1] == 2.5
        assert torch.equal(args[0], x) and torch.equal(args[2], w)
        for t in (args[0], args[2]):
            assert t.data_ptr() not in seen
            seen.add(t.data_ptr())
    out = untrusted.FreshOutputs([{"shape": [4, 16], "dtype": "bfloat16"}, {"shape": [3], "dtype": "int32"}],
                                 calls=3)
    for i in range(3):
        a, b = out.call(i)
        assert bool(torch.isnan(a.float()).all()) and bool((b == -1).all())
        a.fill_(1.0)
    assert sys.modules["accelopt.fib.untrusted"] is untrusted


def test_the_gpu_worker_gives_fresh_inputs_too():
    """gpu_worker.py (triton and python trials on the GPU machine) follows the same rules; checked with
    ACCELOPT_FIB_GPU_DEVICE=cpu as tests/python/fib/test_gpu_plumbing.py does."""
    if _torch() is None:
        return
    from accelopt.fib import evaluate, gpu
    from accelopt.fib import trusted as T
    d = _definition("definitions/rmsnorm/rmsnorm_h16.json")
    w = dict(_workload("workloads/rmsnorm/rmsnorm_h16.jsonl"), axes={"batch_size": 256})
    opened = evaluate.open_workload({"definition_text": json.dumps(d), "workload": w, "root": FIXTURE, "seed": 1,
                                     "trials": 1, "timing": {"warmup": 3, "iterations": 15, "cold_cache": False}})
    session = T.session(opened["baseline"])
    old = os.environ.get("ACCELOPT_FIB_GPU_DEVICE")
    os.environ["ACCELOPT_FIB_GPU_DEVICE"] = "cpu"
    py = "/usr/bin/python3.11"
    try:
        reply, first, _after, _ = gpu._gpu_trial(py, session, 0, "reference", None, False, False, 120, True)
        assert reply["status"] == "ok", reply
        session["trials"][0]["gpu_reference"] = T.normalize_outputs(first, session["outputs"])

        def run(solution, dps):
            reply, first, after, digests = gpu._gpu_trial(py, session, 0, "solution", solution, dps, True, 120, True)
            if reply["status"] != "ok":
                return reply
            return gpu._judge(session, 0, first, after, digests, reply["median_ms"], reply["log"])

        honest = run(_solution("honest", _RMS + "\ndef run(x, w):\n    return _rms(x, w)\n"), False)
        memo = run(_solution("memo", _RMS + "\n_seen = {}\n\ndef run(x, w):\n"
                                            "    key = (x.data_ptr(), w.data_ptr())\n"
                                            "    if key not in _seen:\n"
                                            "        _seen[key] = _rms(x, w)\n"
                                            "    return _seen[key]\n"), False)
        assert honest["status"] == "PASSED" and memo["status"] == "PASSED", (honest, memo)
        assert honest["median_ms"] / memo["median_ms"] < 3.0, (honest["median_ms"], memo["median_ms"])
        same = run(_solution("same", _RMS + "\n_cache = []\n\ndef run(x, w):\n"
                                            "    if not _cache:\n"
                                            "        _cache.append(_rms(x, w))\n"
                                            "    return _cache[0]\n"), False)
        assert same["status"] == "runtime_error" and "same tensor object" in same["message"], same
        skip = run(_solution("skip", _RMS + "\n_calls = [0]\n\ndef run(x, w, out):\n"
                                            "    _calls[0] += 1\n"
                                            "    if _calls[0] == 1:\n"
                                            "        out.copy_(_rms(x, w))\n"), True)
        assert skip["status"] != "PASSED" and "after timing" in skip["log"], skip
    finally:
        evaluate.close_workload({"baseline": opened["baseline"]})
        if old is None:
            os.environ.pop("ACCELOPT_FIB_GPU_DEVICE", None)
        else:
            os.environ["ACCELOPT_FIB_GPU_DEVICE"] = old
