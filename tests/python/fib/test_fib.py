"""accelopt.fib: seeded inputs, FIB's judge and output normalisation, the
trial harness in-process, the source rules' fib profile (docs/flashinfer.md)."""
import json
import math
import os

from accelopt.sandbox import static_check

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "flashinfer")


def _torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    return torch


def _definition(rel):
    with open(os.path.join(FIXTURE, rel), encoding="utf-8") as handle:
        return json.load(handle)


def _workloads(rel):
    with open(os.path.join(FIXTURE, rel), encoding="utf-8") as handle:
        return [json.loads(line)["workload"] for line in handle if line.strip()]


def test_syntax_checks():
    from accelopt.fib import syntax
    assert syntax.check_module("import torch\n\ndef run(x):\n    return x\n") is None
    assert "top-level function named 'run'" in syntax.check_module("def forward(x):\n    return x\n")
    assert "top-level function named 'run'" in syntax.check_module("class A:\n    def run(self):\n        pass\n")
    assert "valid Python" in syntax.check_module("def run(:\n")
    assert syntax.check_expression("len_indptr == batch_size + 1") is None
    assert syntax.check_expression("n >>= 1") is not None


def test_static_rules_fib_profile():
    torch_code = "import torch\nfrom .helpers import scale\n\ndef run(x):\n    return x.data.tolist()\n"
    assert static_check.first_violation(torch_code, "main.py", profile="fib") is None
    kinds = {v.kind for v in static_check.scan(torch_code, "main.py")}  # the NKI profile refuses both
    assert kinds == {"forbidden_import", "forbidden_access"}
    assert static_check.first_violation("import os\n", "m.py", profile="fib").kind == "forbidden_import"
    assert static_check.first_violation("import torch\ntorch.load('x')\n", "m.py", profile="fib").kind == "forbidden_access"
    assert static_check.first_violation("import triton.language as tl\nx = tl.load(p)\n", "m.py", profile="fib") is None
    assert static_check.first_violation("import torch\ntorch.matmul = None\n", "m.py", profile="fib").kind == "forbidden_access"


def test_inputs_are_seeded_and_follow_fib_rules():
    torch = _torch()
    if torch is None:
        return
    from accelopt.fib import inputs
    d = _definition("definitions/rmsnorm/rmsnorm_h16.json")
    w = _workloads("workloads/rmsnorm/rmsnorm_h16.jsonl")[1]
    a = inputs.make_inputs(d, w, FIXTURE, inputs.trial_seed(0, w["uuid"], 0))
    b = inputs.make_inputs(d, w, FIXTURE, inputs.trial_seed(0, w["uuid"], 0))
    c = inputs.make_inputs(d, w, FIXTURE, inputs.trial_seed(0, w["uuid"], 1))
    assert [tuple(t.shape) for t in a] == [(4, 16), (16,)]
    assert all(t.dtype == torch.bfloat16 for t in a)
    assert all(torch.equal(x, y) for x, y in zip(a, b))  # same seed, same inputs
    assert not torch.equal(a[0], c[0])  # fresh inputs per trial
    assert inputs.trial_seed(0, "u", 0) != inputs.trial_seed(1, "u", 0)
    # Integer ranges, bool, a random scalar, sampling's softmax.
    d2 = {"name": "t", "op_type": "sampling", "axes": {"n": {"type": "const", "value": 4096}},
          "inputs": {"i8": {"shape": ["n"], "dtype": "int8"}, "i32": {"shape": ["n"], "dtype": "int32"},
                     "flag": {"shape": ["n"], "dtype": "bool"}, "s": {"shape": None, "dtype": "float32"},
                     "probs": {"shape": ["n"], "dtype": "float32"}},
          "outputs": {"y": {"shape": ["n"], "dtype": "float32"}}, "reference": "def run(*a):\n    pass\n"}
    i8, i32, flag, s, probs = inputs.make_inputs(d2, {"uuid": "x", "axes": {}, "inputs": {}}, FIXTURE, 5)
    assert i8.dtype == torch.int8 and int(i8.min()) >= -128 and int(i8.max()) <= 127
    assert int(i32.min()) >= -1024 and int(i32.max()) < 1024 and int(i32.max()) > 512
    assert flag.dtype == torch.bool and 0 < int(flag.sum()) < 4096
    assert isinstance(s, float)
    assert abs(float(probs.sum()) - 1.0) < 1e-4


def test_safetensors_blob_and_scalar_inputs():
    torch = _torch()
    if torch is None:
        return
    from accelopt.fib import inputs
    d = _definition("definitions/gemm/gemm_n8_k16.json")
    w = _workloads("workloads/gemm/gemm_n8_k16.jsonl")[0]
    a, b = inputs.make_inputs(d, w, FIXTURE, 1)
    assert a.dtype == torch.float16 and tuple(a.shape) == (4, 16)
    with open(os.path.join(FIXTURE, "gemm_n8_k16_golden.json"), encoding="utf-8") as handle:
        golden = json.load(handle)
    c = (a.float() @ b.float().T).half()
    assert c[0].tolist() == golden["C"][0]
    assert math.isclose(float(c.float().sum()), 1.625)
    d2 = _definition("definitions/elementwise/scale_add_n8.json")
    x, bias, alpha = inputs.make_inputs(d2, _workloads("workloads/elementwise/scale_add_n8.jsonl")[0], FIXTURE, 1)
    assert alpha == 0.5 and tuple(x.shape) == (3, 8)
    bad = dict(w, inputs=dict(w["inputs"], A={"type": "safetensors", "path": "./blob/none.safetensors", "tensor_key": "A"}))
    try:
        inputs.make_inputs(d, bad, FIXTURE, 1)
    except inputs.InputError as exc:
        assert "none.safetensors" in str(exc)
    else:
        raise AssertionError("a missing blob must raise")


def test_judge_follows_fibs_order():
    torch = _torch()
    if torch is None:
        return
    from accelopt.fib import trusted as T
    specs = [{"name": "y", "shape": [2, 2], "dtype": "float32"}]
    ref = [torch.tensor([[1.0, 2.0], [3.0, 100.0]])]
    tol = (1e-2, 1e-2, 1.0)
    assert T.judge(ref[0].clone(), ref, specs, tol)[:2] == (0.0, 0.0)

    def status(value, tolerance=tol):
        try:
            T.judge(value, ref, specs, tolerance)
        except T.Verdict as v:
            return v.status, v.errors
        return "PASSED", None

    assert status(torch.zeros(2, 3))[0] == "INCORRECT_SHAPE"
    assert status(torch.zeros(2, 3, dtype=torch.float16))[0] == "INCORRECT_SHAPE"  # shape before dtype
    assert status(ref[0].double())[0] == "INCORRECT_DTYPE"
    inf = ref[0].clone()
    inf[0, 0] = float("inf")
    inf[0, 1] = float("nan")
    s, errors = status(inf)
    assert s == "INCORRECT_NUMERICAL" and math.isinf(errors[0])  # inf is found before NaN
    # An element fails only when BOTH abs > atol and rel > rtol: 100.5 vs 100 passes (rel 0.005).
    near = ref[0].clone()
    near[1, 1] = 100.5
    assert status(near)[0] == "PASSED"
    off = ref[0].clone()
    off[0, 0] = 1.5
    s, errors = status(off)
    assert s == "INCORRECT_NUMERICAL" and errors[2] == 0.75
    assert status(off, (1e-2, 1e-2, 0.75))[0] == "PASSED"  # the matched ratio
    assert T.tolerance("moe_fp8_block_scale_ds_routing", {}) == (1e-2, 1e-2, 0.95)
    # Output normalisation: a tuple of the wrong length, a scalar for a 0-d output.
    try:
        T.normalize_outputs((ref[0], ref[0]), specs)
    except T.Verdict as v:
        assert v.status == "RUNTIME_ERROR" and "2 values" in v.message
    scalar = T.normalize_outputs(3.0, [{"name": "s", "shape": [], "dtype": "float32"}])
    assert scalar[0].dtype == torch.float32 and scalar[0].dim() == 0


def test_trials_in_process_dps_and_value_returning():
    torch = _torch()
    if torch is None:
        return
    from accelopt.fib import evaluate
    d = _definition("definitions/rmsnorm/rmsnorm_h16.json")
    w = _workloads("workloads/rmsnorm/rmsnorm_h16.jsonl")[0]
    opened = evaluate.open_workload({"definition_text": json.dumps(d), "workload": w, "root": FIXTURE, "seed": 3,
                                     "trials": 2, "timing": {"warmup": 1, "iterations": 3, "cold_cache": False}})
    base = opened["baseline"]
    try:
        for t in range(2):
            assert evaluate.trial({"baseline": base, "trial": t, "role": "reference"})["status"] == "OK"
        code = ("import torch\n\ndef run(x, w{extra}):\n    x32 = x.float()\n"
                "    y = (x32 * torch.rsqrt(x32.square().mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)\n"
                "    {ret}\n")
        value = {"name": "v", "spec": {"language": "python", "entry_point": "main.py::run"},
                 "sources": [{"path": "main.py", "content": code.format(extra="", ret="return y")}]}
        dps = {"name": "d", "spec": {"language": "python", "entry_point": "main.py::run"},
               "sources": [{"path": "main.py", "content": code.format(extra=", out", ret="out.copy_(y)")}]}
        for solution, flag in ((value, None), (dps, None), (value, False), (dps, True)):
            v = evaluate.trial({"baseline": base, "trial": 1, "role": "solution", "solution": solution, "dps": flag})
            assert v["status"] == "PASSED", v
            assert v["dps"] == (solution is dps)
        wrong = evaluate.trial({"baseline": base, "trial": 0, "role": "solution", "solution": value, "dps": True})
        assert wrong["status"] == "COMPILE_ERROR"  # DPS asked, the signature takes only the inputs
        multi = {"name": "m", "spec": {"language": "python", "entry_point": "pkg/main.py::run"},
                 "sources": [{"path": "pkg/main.py", "content": "from .impl import run  # noqa\n"},
                             {"path": "pkg/impl.py", "content": code.format(extra="", ret="return y")}]}
        assert evaluate.trial({"baseline": base, "trial": 0, "role": "solution", "solution": multi})["status"] == "PASSED"
    finally:
        evaluate.close_workload({"baseline": base})


def test_golden_rmsnorm_reference_and_wrong_solution_statistics():
    """The definition's reference on the golden inputs equals the golden output bit for bit, and the
    judge's statistics of the wrong solution equal the fixture's NumPy error_stats."""
    torch = _torch()
    if torch is None:
        return
    from accelopt.fib import trusted as T
    with open(os.path.join(FIXTURE, "golden_rmsnorm.json"), encoding="utf-8") as handle:
        golden = json.load(handle)
    g = golden["rmsnorm_h16"]
    x = torch.tensor(g["hidden_states"], dtype=torch.float32).to(torch.bfloat16)
    w = torch.tensor(g["weight"], dtype=torch.float32).to(torch.bfloat16)
    namespace = {}
    exec(_definition("definitions/rmsnorm/rmsnorm_h16.json")["reference"], namespace)  # noqa: S102 - the fixture's reference
    y = namespace["run"](x, w)
    assert torch.equal(y.float(), torch.tensor(g["output"], dtype=torch.float32))
    x32 = x.float()
    wrong = (x32 * torch.rsqrt(torch.mean(x32 * x32, dim=1, keepdim=True) + 1e-6)).to(torch.bfloat16)
    specs = [{"name": "output", "shape": [4, 16], "dtype": "bfloat16"}]
    try:
        T.judge(wrong, [y], specs, (1e-2, 1e-2, 1.0))
    except T.Verdict as v:
        max_abs, max_rel, ratio = v.errors
    else:
        raise AssertionError("the wrong solution must fail")
    expected_abs, expected_rel, passed, expected_ratio = golden["wrong_vs_ref"]
    assert not passed
    assert math.isclose(max_abs, expected_abs, rel_tol=1e-6)
    assert math.isclose(max_rel, expected_rel, rel_tol=1e-5)
    assert math.isclose(ratio, expected_ratio, rel_tol=1e-9)
