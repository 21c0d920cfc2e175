"""Run kind ``flashinfer``: a FlashInfer-Bench evaluation (pipelines/flashinfer-profile.yaml, docs/flashinfer.md).

Recognised by ``summary.json`` holding ``definitions`` (native:fib_summary). The page shows
per definition every solution with FIB's statuses, its speedups over the reference (and the
baseline author's score when there is one), the solutions that were not run, once each with
the workloads they missed and why, and says "none evaluated" where no solution passed,
never a speedup of 0.
"""
import collections
import math

from .. import charts
from .. import common
from .. import markup
from ..page import Report, Section

KIND = "flashinfer"
LABEL = "FlashInfer-Bench evaluation"


def matches(run):
    """True for a FlashInfer-Bench evaluation (its summary lists definitions)."""
    summary = run.json("summary.json", None)
    return isinstance(summary, dict) and isinstance(summary.get("definitions"), list)


def _definitions(run):
    summary = run.json("summary.json", {})
    return summary, [d for d in summary.get("definitions") or [] if isinstance(d, dict) and d.get("definition")]


def _best(definition):
    """The best speedup over the reference of a definition, or None when no solution passed."""
    values = [s.get("best_speedup_vs_reference") for s in definition.get("solutions") or [] if isinstance(s, dict)]
    values = [float(v) for v in values if isinstance(v, (int, float)) and v > 0]
    return max(values) if values else None


def summarize(run):
    """The index entry: per definition (as a case) the best speedup over the reference; their geomean."""
    _summary, definitions = _definitions(run)
    problems, speedups = [], []
    for d in definitions:
        best = _best(d)
        if best:
            speedups.append(best)
        problems.append({"case_name": d["definition"], "problem": d.get("op_type", ""), "baseline_ms": None,
                         "best_ms": None, "speedup": best, "status": "evaluated" if best else "none evaluated"})
    geomean = math.exp(sum(math.log(s) for s in speedups) / len(speedups)) if speedups else None
    return {"kind": KIND, "geomean_speedup": geomean, "problems": problems}


def _not_run(definition):
    """solution -> (workloads not run, [reasons in order, each once])."""
    out = collections.OrderedDict()
    for entry in definition.get("not_run") or []:
        if not isinstance(entry, dict):
            continue
        count, reasons = out.get(entry.get("solution", "?"), (0, []))
        reason = entry.get("reason", "")
        out[entry.get("solution", "?")] = (count + 1, reasons + ([reason] if reason not in reasons else []))
    return out


def _statuses(statuses):
    return ", ".join(f"{k} {v}" for k, v in sorted((statuses or {}).items()))


def build(run, base_dir):
    """The report of a FlashInfer-Bench evaluation."""
    summary, definitions = _definitions(run)
    report = Report(title=f"{run.name()} — {run.id}", kind=KIND, subtitle=common.subtitle(run, LABEL))
    statuses = summary.get("statuses") or {}
    passed = statuses.get("PASSED", 0)
    bests = [b for b in (_best(d) for d in definitions) if b]
    report.cards = [("definitions", str(len(definitions))),
                    ("solutions evaluated", str(sum(len(d.get("solutions") or []) for d in definitions))),
                    ("traces", f"{summary.get('traces', 0)} ({passed} passed)"),
                    ("not run", str(summary.get("not_run", 0))),
                    ("best speedup vs reference", f"{max(bests):.3f}x" if bests else "none evaluated"),
                    ("duration", markup.fmt_duration(run.duration_s()))]
    if not definitions:
        report.warnings.append("summary.json lists no definition (the summary stage did not run, or selected nothing).")
    builders = [lambda: _overview_section(definitions), lambda: _definitions_section(definitions),
                lambda: common.run_section(run, base_dir)]
    report.sections = common.safe_sections(report, builders)
    return report


def _overview_section(definitions):
    """Traces by status per definition, and the best speedup over the reference of each."""
    labels = [d["definition"] for d in definitions]
    kinds = sorted({k for d in definitions for s in d.get("solutions") or [] for k in (s.get("statuses") or {})},
                   key=lambda k: (k != "PASSED", k))
    not_run = [sum(c for c, _ in _not_run(d).values()) for d in definitions]
    segments = []
    for index, kind in enumerate(kinds):
        counts = [sum((s.get("statuses") or {}).get(kind, 0) for s in d.get("solutions") or []) for d in definitions]
        segments.append((kind, counts, charts.OK_COLOR if kind == "PASSED" else charts.PALETTE[(index + 1) % len(charts.PALETTE)]))
    if any(not_run):
        segments.append(("not run", not_run, charts.BEFORE))
    body = ""
    if segments and labels:
        body += charts.stacked_bars(labels, segments, "Workloads by status", "solution x workload",
                                    "FIB's status of every evaluated (solution, workload); not run: no device or "
                                    "toolchain for the solution's language.")
    bests = [_best(d) for d in definitions]
    if any(b for b in bests):
        body += charts.bars(labels, bests, "Best speedup over the reference", "reference latency / solution latency (x)",
                            "The best PASSED solution of each definition (dashed: as fast as the reference); "
                            "a definition where nothing passed has no bar.", reference=1.0, value_format="{:.3f}x",
                            colors=[charts.OK_COLOR if (b or 0) > 1 else charts.BEFORE for b in bests])
    if not body:
        body = markup.tag("p", "Nothing was evaluated.", class_="note")
    return Section("overview", "Statuses and speedups", body)


def _definitions_section(definitions):
    """Per definition: every solution with its statuses and speedups, and the solutions not run."""
    parts = []
    for d in definitions:
        name = d["definition"]
        rows, attrs = [], []
        not_run = _not_run(d)
        solutions = [s for s in d.get("solutions") or [] if isinstance(s, dict)]
        for s in solutions:
            missed, reasons = not_run.pop(s.get("solution"), (0, []))
            note = f"not run on {missed} workload(s): {'; '.join(reasons)}" if missed else ""
            rows.append((markup.esc(s.get("solution", "?")), markup.esc(s.get("author", "")), markup.esc(s.get("language", "")),
                         markup.esc(_statuses(s.get("statuses"))), markup.esc(s.get("workloads", 0)),
                         markup.fmt_x(s.get("mean_speedup_vs_reference")), markup.fmt_x(s.get("best_speedup_vs_reference")),
                         markup.fmt_x(s.get("score_vs_baseline")), markup.esc(note)))
            attrs.append({"data_definition": name, "data_solution": s.get("solution", "?"),
                          "data_not_run": str(missed) if missed else None})
        for solution, (missed, reasons) in not_run.items():  # never run on any workload
            rows.append((markup.esc(solution), "", "", markup.badge("not run", "warn"), "0", "-", "-", "-",
                         markup.esc(f"not run on {missed} workload(s): {'; '.join(reasons)}")))
            attrs.append({"data_definition": name, "data_solution": solution, "data_not_run": str(missed)})
        for skipped in d.get("skipped") or []:
            if isinstance(skipped, dict):
                rows.append((markup.esc(f"workload {skipped.get('workload', '?')}"), "", "", markup.badge("skipped", "warn"),
                             "", "", "", "", markup.esc(skipped.get("reason", ""))))
                attrs.append({})
        best = _best(d)
        score = d.get("best_score_vs_baseline")
        verdict = (f"best speedup vs reference {markup.fmt_x(best)}" if best
                   else "none evaluated: no solution passed on any workload")
        if isinstance(score, (int, float)):
            verdict += f"; best vs the baseline ({d.get('baseline_solution')}) {markup.fmt_x(score)}"
        rows.append((markup.tag("b", markup.esc("best")), "", "", "", "", "", markup.esc(markup.fmt_x(best) if best else "-"),
                     markup.fmt_x(score) if isinstance(score, (int, float)) else "-", markup.esc(verdict)))
        attrs.append({"data_definition_summary": name})
        table = markup.table(["solution", "author", "language", "statuses", "workloads", "mean vs reference",
                              "best vs reference", "vs baseline", "note"], rows, numeric=(4, 5, 6, 7), row_attrs=attrs)
        summary = f"{name} ({d.get('op_type', '')}): {verdict}"
        parts.append(markup.tag("details", markup.tag("summary", markup.esc(summary)) + table, open="open"))
    if not parts:
        parts.append(markup.tag("p", "No definition was evaluated.", class_="note"))
    return Section("definitions", "Definitions and solutions", "".join(parts))
