"""report.html of a search run shows the LLM spend caps (docs/llm.md, "Spend caps"): the caps and
the spend in the LLM section, the reason a cap stopped a problem in its "stopped by" column, and a
warning naming it."""
import json
import os

from accelopt import report
from report import report_fixtures as fx

REASON = "spend cap: 3 requests per problem reached (3 spent)"


def test_the_page_names_the_spend_cap_that_stopped_a_problem():
    root = fx.temp_root()
    try:
        run_dir = fx.beam_run(root)
        path = os.path.join(run_dir, "optimize_results.json")
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        data["rows"][0]["stopped"] = REASON
        data["spend"] = {"endpoint": "default",
                         "caps": {"problem": {"requests": 3, "tokens": 4000000, "usd": 5.0},
                                  "run": {"requests": 2000, "tokens": None, "usd": 50.0}},
                         "run": {"requests": 12, "tokens": 14400, "usd": 0.0168, "refused": 2, "stopped": None},
                         "problems": {"silu_M256": {"requests": 3, "stopped": REASON}}}
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        result = report.write_report({"run_dir": run_dir})
        with open(result["path"], encoding="utf-8") as handle:
            html = handle.read()
        fx.check_page(html)
        assert any(REASON in w and "silu_M256" in w for w in result["warnings"])
        assert "stopped by" in html and REASON in html
        assert "Spend caps (endpoint default): per problem 3 requests / 4000000 tokens / 5 USD" in html
        assert "per run 2000 requests / no tokens cap / 50 USD" in html
        assert "2 refused (not sent)" in html
    finally:
        fx.remove(root)
