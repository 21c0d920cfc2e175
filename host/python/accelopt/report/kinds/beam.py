"""Run kind ``optimize-beam``: AccelOpt's beam search (pipelines/nkibench-optimize.yaml).

Recognised by ``optimize_results.json`` or ``optimize/records.jsonl`` in the run
directory; the data it reads is listed in ``beam_data``.
"""
from .. import common
from .. import markup
from ..page import Report
from . import beam_data
from . import beam_sections

KIND = "optimize-beam"
LABEL = "optimization run (beam search)"


def matches(run):
    """True for a run of the optimization loop (its report or its records exist)."""
    return any(run.exists(name) for name in ("optimize_results.json", "optimize_report.json",  # its former name
                                              "optimize/records.jsonl"))


def summarize(run):
    """The index entry: per case the baseline and best latency and the speedup; the geomean speedup."""
    return summarize_search(run, KIND)


def summarize_search(run, kind):
    """The index entry of a search run of ``kind`` (beam, graph search, agent: the same files). Besides the
    contract's fields each problem has ``candidates``, ``candidates_to_best`` and ``seconds_to_best``
    (``compare`` shows what two strategies needed to reach their best)."""
    data = beam_data.BeamRun(run)
    problems = []
    for r in data.rows:
        reached = data.candidates_to_best(r) or (None, None)
        problems.append({"case_name": r["case_name"], "problem": r.get("problem", ""),
                         "baseline_ms": r.get("original_latency_ms"), "best_ms": r.get("best_latency_ms"),
                         "speedup": r.get("speedup"), "status": r.get("status", ""),
                         "candidates": len(data.records_of(r["case_name"])), "candidates_to_best": reached[0],
                         "seconds_to_best": reached[1]})
    return {"kind": kind, "geomean_speedup": data.geomean_speedup(), "problems": problems,
            "candidates": len(data.records), "mode": data.report.get("mode")}


def build(run, base_dir):
    """The report of a beam-search optimization run."""
    return build_search(run, base_dir, KIND, LABEL)


def build_search(run, base_dir, kind, label, extra=()):
    """The report of a search run of ``kind`` (its header says ``label``); ``extra``: builders of the
    kind's own sections, placed after the search progress."""
    data = beam_data.BeamRun(run)
    report = Report(title=f"{run.name()} — {run.id}", kind=kind, subtitle=common.subtitle(run, label))
    geomean = data.geomean_speedup()
    improved = sum(1 for r in data.rows if r.get("status") == "improved")
    correct = sum(1 for r in data.records if r.get("status") == "ok")
    usage = run.llm_usage().get("total") or data.report.get("llm") or {}
    llm_text = (f"{usage.get('requests', 0)} req · ${usage.get('cost_usd', 0.0):.4f}" if usage.get("requests")
                else "none (rules)" if data.report.get("mode") == "rules" else "none")
    speedups = [r["speedup"] for r in data.rows if isinstance(r.get("speedup"), (int, float))]
    report.cards = [("geomean speedup", f"{geomean:.3f}x" if geomean else "-"),
                    ("best single speedup", f"{max(speedups):.3f}x" if speedups else "-"),
                    ("cases improved", f"{improved}/{len(data.rows)}"),
                    ("candidates (correct)", f"{len(data.records)} ({correct})"),
                    ("LLM", llm_text),
                    ("duration", markup.fmt_duration(run.duration_s()))]
    if not data.report:
        report.warnings.append("optimize_results.json is missing (the run stopped before its results stage); "
                               "the figures below come from the records and the last beam.")
    for r in data.rows:  # docs/llm.md, "Spend caps"
        if r.get("stopped"):
            report.warnings.append(f"{r['case_name']}: an LLM spend cap ended its search: {r['stopped']}")
    no_peak = sorted({r.get("problem") or r["case_name"] for r in data.rows if r.get("peak_error")})
    if no_peak:
        report.warnings.append("no % of peak for " + ", ".join(no_peak) + ": " + next(
            r["peak_error"] for r in data.rows if r.get("peak_error")))
    builders = [lambda: beam_sections.speedup_section(data), lambda: beam_sections.best_section(data, base_dir),
                lambda: beam_sections.progress_section(data)]
    builders += [lambda builder=builder: builder(data, base_dir) for builder in extra]
    builders += [lambda: beam_sections.engines_section(data), lambda: beam_sections.outcomes_section(data),
                lambda: beam_sections.llm_section(run, data), lambda: beam_sections.lineage_section(data, base_dir),
                lambda: beam_sections.candidates_section(data, base_dir), lambda: common.run_section(run, base_dir)]
    report.sections = common.safe_sections(report, builders)
    return report
