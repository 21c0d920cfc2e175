"""AccelOpt's peak model against the table of accelopt-facts §5.5 (trn1)."""
from accelopt import peak

# problem: (values, t_peak ms, bound, baseline ms, baseline % of peak)
TABLE = {
    "rope_single_freq_apply": ({"B": 1, "H": 64, "N": 4096, "D": 128}, 0.915, "memory", 4.333, 21.1),
    "mamba": ({"C": 256, "M": 7168, "S": 16}, 0.819, "vec", 2.889, 28.4),
    "gqa_full": ({"B": 1, "D": 128, "KH": 8, "N": 4096, "QH": 16}, 5.787, "mm", 19.111, 30.3),
    "bmm_softmax": ({"B": 16, "K": 64, "M": 4096, "N": 4096}, 4.681, "vec", 12.000, 39.0),
    "silu": ({"M": 4096, "N": 7168}, 0.534, "memory", 1.333, 40.0),
    "adamw": ({"M": 10944, "N": 2048}, 1.018, "memory", 2.000, 50.9),
    "matmul_add_rmsnorm": ({"K": 2048, "M": 4096, "N": 2048}, 1.447, "mm", 2.667, 54.3),
    "bmm": ({"B": 16, "K": 64, "M": 4096, "N": 4096}, 2.515, "memory", 4.611, 54.6),
    "add_rmsnorm_matmul": ({"K": 1024, "M": 4096, "N": 2048}, 0.723, "mm", 1.222, 59.2),
    "matmul": ({"K": 5120, "M": 4096, "N": 12288}, 21.701, "mm", 35.200, 61.7),
    "rmsnorm_matmul": ({"K": 1024, "M": 4096, "N": 2048}, 0.723, "mm", 1.056, 68.5),
    "lora": ({"K": 5120, "M": 4096, "N": 12288, "R": 128}, 22.470, "mm", 30.166, 74.5),
    "swiglu": ({"K": 1024, "M": 4096, "N": 3072}, 3.255, "mm", 4.222, 77.1),
    "transpose_matmul": ({"K": 2048, "M": 4096, "N": 10944}, 7.731, "mm", 9.610, 80.4),
}


def test_trn1_table():
    for problem, (values, t_peak, bound, baseline, percent) in TABLE.items():
        ms, key = peak.peak_latency_ms(problem, values, "trn1")
        assert abs(ms - t_peak) <= 1e-3 * t_peak + 5e-4, (problem, ms, t_peak)
        assert key == bound, (problem, key, bound)
        pct = peak.percent_of_peak(baseline, problem, values, "trn1")
        assert abs(pct - percent) <= 0.15, (problem, pct, percent)


def test_trn1_geomean_matches_published():
    product = 1.0
    for problem, (values, _t, _b, baseline, _p) in TABLE.items():
        product *= peak.percent_of_peak(baseline, problem, values) / 100.0
    geomean = product ** (1.0 / len(TABLE)) * 100.0
    assert abs(geomean - 49.2) < 0.1, geomean


def test_trn2_constants_and_label():
    parts = peak.peak_breakdown("silu", {"M": 4096, "N": 7168}, "trn2")
    assert parts["validated"] is False and parts["bound"] == "memory"
    assert abs(parts["memory_ms"] - 4 * 2 * 4096 * 7168 / 362.5e9 * 1e3) < 1e-9
    mm = peak.peak_breakdown("matmul", {"K": 5120, "M": 4096, "N": 12288}, "trn2")
    assert abs(mm["mm_ms"] - 2 * 4096 * 12288 * 5120 / 20e12 * 1e3) < 1e-9
    vec = peak.peak_breakdown("mamba", {"C": 256, "M": 7168, "S": 16}, "trn2")
    assert abs(vec["vec_ms"] - 8 * 7168 * 256 * 16 / (2 * 128 * 0.96e9) * 1e3) < 1e-9
    assert peak.peak_breakdown("silu", {"M": 4096, "N": 7168}, "trn1")["validated"] is True


def test_errors_and_describe():
    for bad in (lambda: peak.peak_latency_ms("conv2d", {"M": 1}),
                lambda: peak.peak_latency_ms("silu", {"M": 1}),
                lambda: peak.peak_latency_ms("silu", {"M": 1, "N": 1}, "trn3")):
        try:
            bad()
        except KeyError:
            continue
        raise AssertionError("bad input accepted")
    try:
        peak.percent_of_peak(0.0, "silu", {"M": 1, "N": 1})
    except ValueError:
        pass
    else:
        raise AssertionError("zero latency accepted")
    out = peak.describe({"problem": "silu", "values": {"M": 4096, "N": 7168}, "latency_ms": 1.333})
    assert out["bound"] == "memory" and abs(out["percent_of_peak"] - 40.0) < 0.1
    assert "percent_of_peak" not in peak.describe({"problem": "silu", "values": {"M": 1, "N": 1}})
