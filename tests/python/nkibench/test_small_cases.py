"""Every NKIBench problem's small case passes 5 seeds through profile_kernel on the emulator."""
from accelopt import nkibench, profile


def _check(problem):
    (case,) = nkibench.iter_cases(problems=[problem], case_ids=["small"])
    result = profile.profile_kernel(nkibench.profile_request(case, backend="emulator"))
    assert result["error"] is None, result["error"]
    assert result["compiled"] and result["correct"]
    assert len(result["rel_errors"]) == 5 and max(result["rel_errors"]) < case.rel_tol
    assert result["estimated"] and result["latency_ms"] > 0


def test_silu():
    _check("silu")


def test_matmul():
    _check("matmul")


def test_rmsnorm_matmul():
    _check("rmsnorm_matmul")


def test_add_rmsnorm_matmul():
    _check("add_rmsnorm_matmul")


def test_bmm():
    _check("bmm")


def test_bmm_softmax():
    _check("bmm_softmax")


def test_gqa_full():
    _check("gqa_full")


def test_lora():
    _check("lora")


def test_mamba():
    _check("mamba")


def test_matmul_add_rmsnorm():
    _check("matmul_add_rmsnorm")


def test_rope_single_freq_apply():
    _check("rope_single_freq_apply")


def test_swiglu():
    _check("swiglu")


def test_transpose_matmul():
    _check("transpose_matmul")


def test_adamw():
    _check("adamw")


def test_every_problem_has_a_small_case_test():
    tested = {name[len("test_"):] for name in globals() if name.startswith("test_")}
    problems = set(nkibench.load_summary())
    assert problems <= tested, problems - tested
