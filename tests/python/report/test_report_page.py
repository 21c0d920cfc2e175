"""accelopt.report: the page of each run kind parses, holds its charts and no external URL."""
import os

from accelopt import report
from accelopt.report import kinds
from accelopt.report.run_files import RunFiles
from report import report_fixtures as fx


def _svg_count(root):
    return sum(1 for _ in root.iter("svg"))


def test_kinds_are_recognised_from_the_files():
    root = fx.temp_root()
    try:
        assert kinds.detect(RunFiles(fx.profile_run(root))).KIND == "profile"
        assert kinds.detect(RunFiles(fx.beam_run(root))).KIND == "optimize-beam"
        assert kinds.detect(RunFiles(fx.beam_run(root, name="partial", with_report=False))).KIND == "optimize-beam"
        assert kinds.detect(RunFiles(fx.generic_run(root))).KIND == "generic"
        assert [k.KIND for k in kinds.KINDS][-1] == "generic"
    finally:
        fx.remove(root)


def test_profile_page():
    root = fx.temp_root()
    try:
        run_dir = fx.profile_run(root)
        result = report.write_report({"run_dir": run_dir})
        assert result["kind"] == "profile" and result["path"] == os.path.join(run_dir, "report.html")
        with open(result["path"], encoding="utf-8") as handle:
            html = handle.read()
        page = fx.check_page(html)
        assert _svg_count(page) == result["charts"] >= 4  # latency, % of peak, engines, HBM, outcomes
        assert "2/3" in html                                 # kernels correct
        assert "compile_error" in html and "ERROR 1: bad &lt;tile&gt; &amp; more" in html
        assert 'href="../kernels/silu_0.py"' in html         # links are relative
        assert 'href="stages/03-profile/item-0000"' in html
    finally:
        fx.remove(root)


def test_beam_page_has_every_section():
    root = fx.temp_root()
    try:
        run_dir = fx.beam_run(root)
        result = report.write_report({"run_dir": run_dir})
        assert result["kind"] == "optimize-beam" and result["warnings"] == []
        with open(result["path"], encoding="utf-8") as handle:
            html = handle.read()
        page = fx.check_page(html)
        sections = [s.get("id") for s in page.iter("section")]
        assert sections == ["speedup", "best", "progress", "engines", "outcomes", "llm", "lineage", "candidates", "run"]
        # speedup, % peak, progress, engines, HBM, outcomes, LLM tokens
        assert _svg_count(page) == 7
        assert "1.250x" in html and "1.118x" in html           # best single speedup, geomean
        assert "fuse exp into one activation" in html and "widen tiles [widen]" in html   # lineage
        assert '<span class="add">+    e = e * 1.0</span>' in html                      # baseline -> best diff
        for kind in ("compile_error", "no_code_block", "wrong_result"):
            assert kind in html
        assert "12 req" in html and "0.0168" in html            # LLM requests and cost
        # every candidate links to its kernel, its sidecar json and its profile folder
        for cid in ("silu_M256-i0-b0p0-s0", "adamw_M192-i0-b1p1-s0"):
            assert f'href="stages/06-optimize/iter-0/02-execute/kernels/{cid}.py"' in html
            assert f'href="stages/06-optimize/iter-0/02-execute/kernels/{cid}.json"' in html
        assert 'href="stages/06-optimize/iter-0/03-profile/item-0004"' in html
        assert "no correct candidate" in html
    finally:
        fx.remove(root)


def test_beam_page_without_the_final_report_stage():
    root = fx.temp_root()
    try:
        run_dir = fx.beam_run(root, with_report=False, llm=False)
        result = report.render_report({"run_dir": run_dir})
        page = fx.check_page(result["html"])
        assert any("optimize_results.json is missing" in w for w in result["warnings"])
        assert "No LLM requests" in result["html"]
        assert _svg_count(page) >= 5
        summary = report.summarize_run({"run_dir": run_dir})
        silu = [p for p in summary["problems"] if p["case_name"] == "silu_M256"][0]
        assert abs(silu["speedup"] - 1.25) < 1e-9 and silu["status"] == "improved"
    finally:
        fx.remove(root)


def test_a_run_made_before_the_rename_is_read_from_optimize_report_json():
    """Runs made before issue 40 named the results file optimize_report.json: same page, same summary."""
    root = fx.temp_root()
    try:
        now = fx.beam_run(root, name="now")
        before = fx.beam_run(root, name="before")
        os.rename(os.path.join(before, "optimize_results.json"), os.path.join(before, "optimize_report.json"))
        for run_dir in (now, before):
            result = report.render_report({"run_dir": run_dir})
            assert result["kind"] == "optimize-beam"
            assert not any("is missing" in w for w in result["warnings"]), result["warnings"]
        a, b = (report.summarize_run({"run_dir": d}) for d in (now, before))
        assert a["geomean_speedup"] == b["geomean_speedup"] and a["problems"] == b["problems"]
    finally:
        fx.remove(root)


def test_out_elsewhere_links_back_into_the_run():
    root = fx.temp_root()
    try:
        run_dir = fx.beam_run(root)
        out = os.path.join(root, "pages", "latest.html")
        os.makedirs(os.path.dirname(out))
        result = report.write_report({"run_dir": run_dir, "out": out})
        assert result["path"] == out and not os.path.exists(os.path.join(run_dir, "report.html"))
        with open(out, encoding="utf-8") as handle:
            html = handle.read()
        fx.check_page(html)
        name = os.path.basename(run_dir)
        assert f'href="../{name}/stages/06-optimize/iter-0/02-execute/kernels/silu_M256-i0-b0p0-s0.py"' in html
    finally:
        fx.remove(root)


def test_generic_and_broken_runs_still_get_a_page():
    root = fx.temp_root()
    try:
        run_dir = fx.generic_run(root)
        result = report.render_report({"run_dir": run_dir})
        assert result["kind"] == "generic" and result["charts"] == 0
        assert "failed" in result["html"]
        # A corrupt optimize_results.json and records: the page is still written, from what is readable.
        beam = fx.beam_run(root, name="corrupt")
        with open(os.path.join(beam, "optimize_results.json"), "w") as handle:
            handle.write("{not json")
        with open(os.path.join(beam, "optimize", "records.jsonl"), "a") as handle:
            handle.write("{half a line\n")
        result = report.render_report({"run_dir": beam})
        fx.check_page(result["html"])
        assert result["kind"] == "optimize-beam"
    finally:
        fx.remove(root)


def test_summaries_for_the_index():
    root = fx.temp_root()
    try:
        profile = report.summarize_run({"run_dir": fx.profile_run(root)})
        assert profile["kind"] == "profile" and profile["geomean_speedup"] is None
        assert [p["status"] for p in profile["problems"]] == ["correct", "correct", "compile_error"]
        assert profile["duration_s"] == 90.0 and profile["status"] == "succeeded"
        beam = report.summarize_run({"run_dir": fx.beam_run(root)})
        assert beam["kind"] == "optimize-beam" and abs(beam["geomean_speedup"] - 1.25 ** 0.5) < 1e-9
        assert beam["candidates"] == 5 and beam["id"] == "20261125-110000-nkibench-optimize"
        assert beam["report"] is None
    finally:
        fx.remove(root)
