"""Run-to-run comparison: per-case best latency of two runs, as rows and as a page with charts.

Between two search strategies (beam, graph search, agent at equal budget) what matters besides
the best latency is whether both started from the same baseline, and how many candidates and
how much time each needed to reach its best: the rows carry both runs' baselines, candidates,
candidates to the best and seconds to the best (the kinds' ``summarize``; None where a run kind
does not know them)."""
import math

from . import charts
from . import markup
from . import page


def compare(a, b):
    """Rows for the cases of summaries ``a`` and ``b`` (``summarize_run`` results), A's order first.

    Each row: ``{"case_name", "problem", "a_ms", "b_ms", "ratio"}`` where ``ratio`` = a_ms / b_ms
    (> 1: B is faster), None unless both ran the case correctly. ``geomean_ratio`` is over those rows.
    """
    a_cases = {p["case_name"]: p for p in a.get("problems", [])}
    b_cases = {p["case_name"]: p for p in b.get("problems", [])}
    names = list(a_cases) + [n for n in b_cases if n not in a_cases]
    rows = []
    for name in names:
        pa, pb = a_cases.get(name, {}), b_cases.get(name, {})
        a_ms, b_ms = _number(pa.get("best_ms")), _number(pb.get("best_ms"))
        row = {"case_name": name, "problem": pa.get("problem") or pb.get("problem") or "",
               "a_ms": a_ms, "b_ms": b_ms, "ratio": a_ms / b_ms if a_ms and b_ms else None}
        for side, p in (("a", pa), ("b", pb)):
            row[f"{side}_baseline_ms"] = _number(p.get("baseline_ms"))
            for key in ("candidates", "candidates_to_best", "seconds_to_best"):
                value = p.get(key)
                row[f"{side}_{key}"] = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        a_base, b_base = row["a_baseline_ms"], row["b_baseline_ms"]
        # Two strategies compare only from the same kernel: 0.1 % apart is a different baseline.
        row["same_baseline"] = None if not (a_base and b_base) else abs(a_base - b_base) <= 1e-3 * max(a_base, b_base)
        rows.append(row)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None
    return {"a": _brief(a), "b": _brief(b), "rows": rows, "geomean_ratio": geomean}


def _count(to_best, total):
    if to_best is None:
        return "-"
    return markup.esc(f"{to_best} of {total}" if total is not None else str(to_best))


def _number(value):
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _brief(summary):
    return {k: summary.get(k) for k in ("id", "dir", "name", "kind", "status", "started_at", "geomean_speedup", "report")}


def page_html(a, b, result, base_dir):
    """The comparison page: latency side by side, B's speedup over A per case, and the table."""
    rows = result["rows"]
    labels = [r["case_name"] for r in rows]
    report = page.Report(title=f"Compare {a['id']} (A) with {b['id']} (B)", kind="compare",
                         subtitle=markup.esc(f"A: {a.get('name')} ({a.get('kind')}, {a.get('started_at')}) · "
                                             f"B: {b.get('name')} ({b.get('kind')}, {b.get('started_at')})"),
                         regenerate=f"accelopt-host compare {a.get('dir') or a['id']} {b.get('dir') or b['id']} --out FILE")
    differ = [r["case_name"] for r in rows if r.get("same_baseline") is False]
    if differ:
        report.warnings.append(f"different baselines in A and B for {', '.join(differ)}: their best latencies and "
                               "speedups do not compare as strategies on the same kernel.")
    faster = sum(1 for r in rows if r["ratio"] and r["ratio"] > 1.0)
    slower = sum(1 for r in rows if r["ratio"] and r["ratio"] < 1.0)
    geomean = result.get("geomean_ratio")
    report.cards = [("geomean A/B latency", f"{geomean:.3f}x" if geomean else "-"), ("cases faster in B", str(faster)),
                    ("cases slower in B", str(slower)), ("cases", str(len(rows)))]
    body = charts.grouped_bars(labels, [("A " + a["id"], [r["a_ms"] for r in rows], charts.BEFORE),
                                        ("B " + b["id"], [r["b_ms"] for r in rows], charts.AFTER)],
                               "Best latency per case", "latency (ms)", "Best latency of each case in run A and run B.",
                               value_format="{:.4g}")
    ratios = [r["ratio"] for r in rows]
    body += charts.bars(labels, ratios, "B's speedup over A", "A latency / B latency (x)",
                        "Above 1 (dashed line): B is faster on that case.", reference=1.0, value_format="{:.3f}x",
                        colors=[charts.OK_COLOR if (v or 0) > 1 else charts.BEFORE for v in ratios])
    table_rows = [(markup.esc(r["problem"]), markup.esc(r["case_name"]), markup.fmt(r.get("a_baseline_ms")),
                   markup.fmt(r.get("b_baseline_ms")), markup.fmt(r["a_ms"]), markup.fmt(r["b_ms"]), markup.fmt_x(r["ratio"]),
                   _count(r.get("a_candidates_to_best"), r.get("a_candidates")),
                   _count(r.get("b_candidates_to_best"), r.get("b_candidates")),
                   markup.esc(markup.fmt_duration(r.get("a_seconds_to_best"))),
                   markup.esc(markup.fmt_duration(r.get("b_seconds_to_best")))) for r in rows]
    body += markup.table(["problem", "case", "A baseline ms", "B baseline ms", "A best ms", "B best ms", "A/B",
                          "A candidates to best", "B candidates to best", "A time to best", "B time to best"],
                         table_rows, numeric=tuple(range(2, 11)))
    body += markup.tag("p", markup.esc("Candidates to best: the candidates the run evaluated for that case up to and "
                                       "including its best kernel, of all it evaluated (0: the baseline stayed best); "
                                       "time to best: from the run's start until that kernel was profiled."),
                       class_="note")
    links = [markup.link(f"{label} report", markup.rel_href(s["report"], base_dir)) for label, s in (("A", a), ("B", b))
             if s.get("report")]
    if links:
        body += markup.tag("p", " · ".join(links))
    report.sections.append(page.Section("latency", "Best latency side by side", body))
    return page.render(report)
