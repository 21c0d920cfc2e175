"""The model's floor (bench/feasibility.py) on NKIBench problems: it is what the model's
own rates allow, and it never exceeds a latency the hardware measured (issue 35)."""
import importlib.util
import os

from nki_emu.cost import scheduler, targets

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
T1 = targets.get("trn1")


def _feasibility():
    spec = importlib.util.spec_from_file_location("bench_feasibility", os.path.join(REPO, "bench", "feasibility.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_floor_is_compulsory_work_at_the_fastest_rates_the_model_allows():
    f = _feasibility()
    # silu (4096 x 7168 fp32): 234.9 MB through HBM at 410 GB/s, plus the launch cost
    ms, bound, parts = f.floor_ms("silu", {"M": 4096, "N": 7168}, T1)
    assert bound == "hbm"
    assert abs(parts["hbm"] - 2 * 4096 * 7168 * 4 / 410e9 * 1e3) < 1e-9
    assert abs(ms - parts["hbm"] - T1.launch_ns * 1e-6) < 1e-12
    # one direction alone: 16 engines at one queue's rate (bmm writes 1 GiB, reads 34 MB)
    ms, bound, parts = f.floor_ms("bmm", {"B": 16, "M": 4096, "N": 4096, "K": 64}, T1)
    per_direction = 16 * T1.dma_queue_bytes_per_ns * 1e9
    assert bound == "dma_direction" and abs(parts["dma_direction"] - 16 * 4096 * 4096 * 4 / per_direction * 1e3) < 1e-9
    # matmul: 2 M N K flops at the fp32 TensorE rate (4 cycles per moving row at 2.8 GHz)
    ms, bound, parts = f.floor_ms("matmul", {"M": 4096, "N": 12288, "K": 5120}, T1)
    assert bound == "tensor"
    assert abs(parts["tensor"] - 2 * 4096 * 12288 * 5120 / (2 * 128 * 128 * 2.8e9 / 4) * 1e3) < 1e-9
    r = f.rates(T1)
    assert r["dma"] == scheduler.dma_rate(T1) * 16 and r["elem_psum"] < r["elem_sbuf"]


def test_compulsory_bytes_agree_with_accelopts_peak_model():
    """AccelOpt's peak model counts the same compulsory HBM bytes (accelopt-facts §5.5)."""
    from accelopt import peak
    f = _feasibility()
    values = {"silu": {"M": 4096, "N": 7168}, "adamw": {"M": 10944, "N": 2048},
              "matmul": {"M": 4096, "N": 12288, "K": 5120}, "rmsnorm_matmul": {"M": 4096, "N": 2048, "K": 1024},
              "bmm": {"B": 16, "M": 4096, "N": 4096, "K": 64}, "mamba": {"M": 7168, "C": 256, "S": 16},
              "lora": {"M": 4096, "N": 12288, "K": 5120, "R": 128},
              "gqa_full": {"B": 1, "N": 4096, "QH": 16, "KH": 8, "D": 128},
              "rope_single_freq_apply": {"B": 1, "H": 64, "N": 4096, "D": 128}}
    for problem, v in values.items():
        w = f.compulsory(problem, v)
        assert w["read"] + w["write"] == peak.peak_breakdown(problem, v)["bytes"], problem
        assert w["mm_flops"] == peak.peak_breakdown(problem, v)["mm_flops"], problem


def test_check_reports_a_floor_above_a_measured_latency():
    f = _feasibility()
    table = [("fast", 1.0, "hbm", [("baseline", 2.0), ("best 1.5x", 1.3)]),
             ("impossible", 1.0, "hbm", [("baseline", 2.0), ("best 2.5x", 0.8), ("best fastest run", 0.7)]),
             ("noisy run only", 1.0, "hbm", [("baseline", 2.0), ("best fastest run", 0.9)])]
    assert f.check(table) == ["impossible: floor 1.000 ms > best 2.5x 0.800 ms"]
    assert f.problem_of("bmm_softmax_B16_K64_M4096_N4096", ["bmm", "bmm_softmax"]) == "bmm_softmax"
    assert f.problem_of("rmsnorm_matmul_K1024", ["rmsnorm_matmul", "add_rmsnorm_matmul"]) == "rmsnorm_matmul"


def test_no_floor_exceeds_a_latency_accelopt_measured():
    """bench/feasibility.py over our NKIBench's full-size cases (the published sizes) against
    AccelOpt's committed measurements, when its repository is on this machine ($ACCELOPT_REPO)."""
    f = _feasibility()
    repo = os.environ.get("ACCELOPT_REPO", f.DEFAULT_REPO)
    if not os.path.exists(repo):
        print(f"skipped: no AccelOpt repository at {repo}")
        return
    table = f.rows(os.path.join(REPO, "nkibench"), repo, T1)
    labels = [label for label, _, _, _ in table]
    assert "silu" in labels and any("best" in what for _, _, _, got in table for what, _ in got)
    assert f.check(table) == []
