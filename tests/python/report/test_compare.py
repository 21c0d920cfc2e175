"""accelopt.report.compare: per-case best latency of two runs."""
import os

from accelopt import report
from accelopt.report import compare
from report import report_fixtures as fx


def test_rows_ratio_and_geomean():
    a = {"id": "a", "problems": [{"case_name": "x", "problem": "p", "best_ms": 2.0}, {"case_name": "y", "best_ms": 1.0},
                                 {"case_name": "only_a", "best_ms": 1.0}]}
    b = {"id": "b", "problems": [{"case_name": "y", "best_ms": 2.0}, {"case_name": "x", "best_ms": 1.0},
                                 {"case_name": "only_b", "best_ms": None}]}
    result = compare.compare(a, b)
    assert [r["case_name"] for r in result["rows"]] == ["x", "y", "only_a", "only_b"]
    assert [r["ratio"] for r in result["rows"]] == [2.0, 0.5, None, None]
    assert abs(result["geomean_ratio"] - 1.0) < 1e-12


def test_compare_runs_writes_a_page_with_charts():
    root = fx.temp_root()
    try:
        a = fx.beam_run(root, name="run-a", speedup=1.25)
        b = fx.beam_run(root, name="run-b", speedup=2.0)
        out = os.path.join(root, "compare.html")
        result = report.compare_runs({"a": a, "b": b, "out": out})
        silu = [r for r in result["rows"] if r["case_name"] == "silu_M256"][0]
        assert abs(silu["ratio"] - 1.6) < 1e-9 and result["path"] == out
        with open(out, encoding="utf-8") as handle:
            page = fx.check_page(handle.read())
        assert sum(1 for _ in page.iter("svg")) == 2
    finally:
        fx.remove(root)
