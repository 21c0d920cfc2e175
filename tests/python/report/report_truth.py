"""Checks that a run's report.html shows that run's own facts (not a test module; issue 36).

``check_search_run(run_dir, kind, label)``: the page of a search run (beam, graph search, agent)
names its kind, and for every improved case its "Best kernels" row holds the winner of
``optimize_results.json``: the candidate id, the latency and HBM traffic of that candidate's
record and profile (not the baseline's), the SHA-256 of ``best/<case>.py``, and the diff
section compares the baseline with that file. ``check_flashinfer_run(run_dir)``: the page of
a FlashInfer-Bench evaluation shows each definition's statuses and speedups from
``summary.json``, says when nothing was evaluated instead of "x0.000", and lists a "not run"
solution once. Both return the number of cases checked; the C++ end-to-end tests
(tests/host/report/report_truth_e2e_test.cc) run the real pipelines and call them.
"""
import hashlib
import json
import math
import os
from xml.etree import ElementTree

from accelopt.report import markup
from report import report_fixtures


def _page(run_dir):
    with open(os.path.join(run_dir, "report.html"), encoding="utf-8") as handle:
        html = handle.read()
    return html, report_fixtures.check_page(html)


def _text(element):
    return "".join(element.itertext())


def _lines(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _profile_metrics(run_dir, candidate):
    """The metrics native:score kept for ``candidate`` (its executor_results.json)."""
    for root, _dirs, files in os.walk(os.path.join(run_dir, "stages")):
        if "executor_results.json" in files:
            with open(os.path.join(root, "executor_results.json"), encoding="utf-8") as handle:
                for record in json.load(handle):
                    if record.get("id") == candidate and isinstance(record.get("metrics"), dict):
                        return record["metrics"]
    return None


def _close(a, b):
    return a is not None and b is not None and math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)


def check_search_run(run_dir, kind, label):
    html, root = _page(run_dir)
    header = _text(root.find(".//header"))
    assert label in header, f"the page header does not name the run kind {label!r}: {header!r}"
    for other in ("beam search", "graph search", "reflexion agent"):
        if other != label:
            assert other not in header, f"the page header names another kind ({other!r}): {header!r}"
    with open(os.path.join(run_dir, "optimize_results.json"), encoding="utf-8") as handle:
        report = json.load(handle)
    records = {r["id"]: r for r in _lines(os.path.join(run_dir, "optimize", "records.jsonl"))}
    rows = {tr.get("data-case"): tr for tr in root.iter("tr") if tr.get("data-case")}
    checked = 0
    for row in report["rows"]:
        case = row["case_name"]
        assert case in rows, f"no Best kernels row for {case}"
        tr = rows[case]
        winner = (row.get("winner") or {}).get("id")
        if row.get("status") != "improved":
            assert tr.get("data-candidate") in ("", None, f"{case}_ID0") or tr.get("data-candidate") == winner
            continue
        assert tr.get("data-candidate") == winner, (tr.attrib, winner)
        record = records[winner]
        assert _close(tr.get("data-latency-ms"), record["latency_ms"]), (tr.attrib, record["latency_ms"])
        assert _close(tr.get("data-latency-ms"), row["best_latency_ms"]), (tr.attrib, row["best_latency_ms"])
        assert markup.fmt(record["latency_ms"]) in _text(tr), (_text(tr), record["latency_ms"])
        best_file = os.path.join(run_dir, "best", case + ".py")
        with open(best_file, "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
        assert tr.get("data-sha256") == digest, (tr.attrib, digest)
        assert digest[:12] in _text(tr)
        metrics = _profile_metrics(run_dir, winner)
        assert metrics is not None, f"no metrics recorded for {winner}"
        for key in ("hbm_read_bytes", "hbm_write_bytes"):
            if key in metrics:
                assert _close(tr.get("data-" + key.replace("_", "-")), metrics[key]), (key, tr.attrib, metrics[key])
        checked += 1
    assert "The two kernels are identical" not in html or checked == 0
    for case, tr in rows.items():
        row = next(r for r in report["rows"] if r["case_name"] == case)
        if row.get("status") == "improved":
            lineage = [section for section in root.iter("section") if section.get("id") == "lineage"]
            assert lineage, "no lineage section"
            details = [d for d in lineage[0].iter("details") if _text(d.find("summary")).startswith(case + ":")]
            assert details, f"no lineage for {case}"
            text = _text(details[0])
            assert "Baseline → best: +" in text and "+0 / -0" not in text, text[:400]
    return checked


def check_flashinfer_run(run_dir):
    html, root = _page(run_dir)
    assert "FlashInfer-Bench" in _text(root.find(".//header")), _text(root.find(".//header"))
    assert "x0.000" not in html and "0.000x" not in html, "a speedup of zero shown for nothing evaluated"
    with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as handle:
        summary = json.load(handle)
    rows = {(tr.get("data-definition"), tr.get("data-solution")): tr for tr in root.iter("tr") if tr.get("data-solution")}
    checked = 0
    for definition in summary["definitions"]:
        name = definition["definition"]
        for solution in definition["solutions"]:
            tr = rows.get((name, solution["solution"]))
            assert tr is not None, f"no row for {name}/{solution['solution']}"
            text = _text(tr)
            for status, count in solution["statuses"].items():
                assert f"{status} {count}" in text, (status, count, text)
            if "best_speedup_vs_reference" in solution:
                assert markup.fmt_x(solution["best_speedup_vs_reference"]) in text, text
            checked += 1
        not_run = {}
        for entry in definition["not_run"]:
            not_run.setdefault(entry["solution"], 0)
            not_run[entry["solution"]] += 1
        for solution, count in not_run.items():
            tr = rows.get((name, solution))
            assert tr is not None, f"no row for the solution not run {name}/{solution}"
            assert f"not run on {count} workload" in _text(tr), _text(tr)
            assert tr.get("data-not-run") == str(count)
        if not definition["solutions"] or all("best_speedup_vs_reference" not in s for s in definition["solutions"]):
            section = [d for d in root.iter("tr") if d.get("data-definition-summary") == name]
            assert section and "none evaluated" in _text(section[0]), name
    # a "not run" reason appears once per solution, not once per workload
    for entry in {e["reason"] for d in summary["definitions"] for e in d["not_run"]}:
        assert html.count(markup.esc(entry)) <= sum(1 for d in summary["definitions"] for s in {e["solution"] for e in d["not_run"] if e["reason"] == entry}), entry
    return checked
