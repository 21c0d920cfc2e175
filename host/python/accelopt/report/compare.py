"""Run-to-run comparison: per-case best latency of two runs, as rows and as a page with charts."""
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
        rows.append({"case_name": name, "problem": pa.get("problem") or pb.get("problem") or "",
                     "a_ms": a_ms, "b_ms": b_ms, "ratio": a_ms / b_ms if a_ms and b_ms else None})
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None
    return {"a": _brief(a), "b": _brief(b), "rows": rows, "geomean_ratio": geomean}


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
                                             f"B: {b.get('name')} ({b.get('kind')}, {b.get('started_at')})"))
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
    table_rows = [(markup.esc(r["problem"]), markup.esc(r["case_name"]), markup.fmt(r["a_ms"]), markup.fmt(r["b_ms"]),
                   markup.fmt_x(r["ratio"])) for r in rows]
    body += markup.table(["problem", "case", "A best ms", "B best ms", "A/B"], table_rows, numeric=(2, 3, 4))
    links = [markup.link(f"{label} report", markup.rel_href(s["report"], base_dir)) for label, s in (("A", a), ("B", b))
             if s.get("report")]
    if links:
        body += markup.tag("p", " · ".join(links))
    report.sections.append(page.Section("latency", "Best latency side by side", body))
    return page.render(report)
