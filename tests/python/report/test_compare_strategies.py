"""The compare page compares what matters between two search strategies, and its footer names
the command that made it (issue 36, item 8): per case the baselines (both runs must start from
the same kernel), the best latency, and the candidates and time each run needed to reach its best."""
import json
import os
from xml.etree import ElementTree

from accelopt import report
from report import report_fixtures as fx


def _text(element):
    return "".join(element.itertext())


def test_the_compare_page_shows_baselines_and_what_each_run_needed_to_reach_its_best():
    root = fx.temp_root()
    try:
        a = fx.beam_run(root, name="run-a", speedup=1.25)
        b = fx.beam_run(root, name="run-b", speedup=2.0)
        # B started from another silu baseline: the page must say so.
        path = os.path.join(b, "optimize_results.json")
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        data["rows"][0]["original_latency_ms"] = 0.06
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        out = os.path.join(root, "compare.html")
        result = report.compare_runs({"a": a, "b": b, "out": out})
        silu = [r for r in result["rows"] if r["case_name"] == "silu_M256"][0]
        assert silu["a_baseline_ms"] == 0.05 and silu["b_baseline_ms"] == 0.06
        assert silu["a_candidates_to_best"] == 2 and silu["b_candidates_to_best"] == 2  # the winner is the 2nd silu record
        assert silu["a_candidates"] == 3
        with open(out, encoding="utf-8") as handle:
            html = handle.read()
        page = fx.check_page(html)
        footer = _text(page.find(".//footer"))
        assert "accelopt-host compare" in footer and "accelopt-host report RUN_DIR" not in footer, footer
        headers = [_text(th) for th in page.iter("th")]
        for column in ("A baseline ms", "B baseline ms", "A candidates to best", "B candidates to best",
                       "A time to best", "B time to best"):
            assert column in headers, headers
        assert "different baselines" in html and "silu_M256" in html
    finally:
        fx.remove(root)
