"""The sections of an optimization (beam search) report, each built from a ``BeamRun``."""
import os

from .. import charts
from .. import diffview
from .. import markup
from .. import metrics_charts
from ..page import Section


def _num(value):
    return float(value) if isinstance(value, (int, float)) else None


def speedup_section(data):
    """Per-case speedup bars, % of peak before/after, and the per-case table."""
    rows = data.rows
    labels = [r["case_name"] for r in rows]
    speedups = [_num(r.get("speedup")) for r in rows]
    colors = [charts.OK_COLOR if (s or 0) > 1.0 else charts.BEFORE for s in speedups]
    geomean = data.geomean_speedup()
    body = charts.bars(labels, speedups, "Speedup of the best kernel over the baseline", "speedup (x)",
                       f"Baseline latency / best latency per case (dashed: no change). Geomean "
                       f"{geomean:.3f}x." if geomean else "Baseline latency / best latency per case.",
                       reference=1.0, value_format="{:.3f}x", colors=colors)
    before = [_num(r.get("percent_of_peak_before")) for r in rows]
    after = [_num(r.get("percent_of_peak_after")) for r in rows]
    if any(v is not None for v in before + after):
        body += charts.grouped_bars(labels, [("baseline", before, charts.BEFORE), ("best", after, charts.AFTER)],
                                    "% of peak before and after", "% of the peak-latency model (higher is better)",
                                    "Peak latency / latency of the baseline and of the best kernel (accelopt.peak).",
                                    value_format="{:.1f}%")
    table_rows = []
    for row in rows:
        status = row.get("status", "")
        badge = markup.badge(status, "ok" if status == "improved" else ("bad" if "failed" in status else "warn"))
        table_rows.append((markup.esc(row.get("problem", "")), markup.esc(row["case_name"]),
                           markup.fmt(row.get("original_latency_ms")), markup.fmt(row.get("best_latency_ms")),
                           markup.fmt_x(row.get("speedup")), markup.fmt(row.get("percent_of_peak_before"), 3, "%"),
                           markup.fmt(row.get("percent_of_peak_after"), 3, "%"), markup.esc(row.get("peak_bound", "")),
                           badge, markup.esc(row.get("reason", ""))))
    body += markup.table(["problem", "case", "baseline ms", "best ms", "speedup", "% peak before", "% peak after", "bound",
                          "status", "why not improved"], table_rows, numeric=(2, 3, 4, 5, 6))
    return Section("speedup", "Speedup and % of peak", body)


def best_section(data, base_dir):
    """Per case the best kernel the run kept: the winning candidate, its latency and HBM traffic (its own
    profile), how it was validated, how many candidates and how long it took to reach it, and the file
    ``best/<case>.py`` with its SHA-256. The data attributes hold the exact values (tests compare them
    with best/ and the records)."""
    rows, attrs = [], []
    for row in data.rows:
        name = row["case_name"]
        improved = row.get("status") == "improved"
        winner = data.winner(row)
        metrics = winner.get("metrics") or {}
        latency = _num(winner.get("latency_ms")) if improved else _num(row.get("original_latency_ms"))
        path = data.best_kernel(row)
        digest = data.best_kernel_sha256(row)
        reached = data.candidates_to_best(row)
        n, seconds = reached if reached else (None, None)
        file_cell = (_kernel_link(data.run.path(path), base_dir, path) if path else markup.esc("-")) + \
            (markup.tag("br") + markup.tag("code", markup.esc(digest[:12])) if digest else "")
        winner_id = (row.get("winner") or {}).get("id") if improved else baseline_id(data, name)
        rows.append((markup.esc(name), markup.esc(winner_id or "-"),
                     markup.badge("improved", "ok") if improved else markup.badge("baseline", "warn"),
                     markup.fmt(latency), markup.fmt_x(row.get("speedup")),
                     markup.fmt_bytes(metrics.get("hbm_read_bytes")),
                     markup.fmt_bytes(metrics.get("hbm_write_bytes")),
                     markup.esc(winner.get("validation") or (row.get("winner") or {}).get("validation") or "-"),
                     markup.esc("-" if n is None else str(n)),
                     markup.esc(markup.fmt_duration(seconds) if seconds is not None else "-"), file_cell))
        attrs.append({"data_case": name, "data_candidate": winner_id or "",
                      "data_latency_ms": repr(latency) if latency is not None else "",
                      "data_hbm_read_bytes": _attr(metrics.get("hbm_read_bytes")),
                      "data_hbm_write_bytes": _attr(metrics.get("hbm_write_bytes")),
                      "data_sha256": digest or "", "data_kernel": path or ""})
    body = markup.tag("p", markup.esc("The kernel each case ended with: the winning candidate's own latency and HBM "
                                      "traffic (its profile), and the file the run kept."), class_="note")
    body += markup.table(["case", "best kernel", "", "latency ms", "speedup", "HBM read", "HBM written", "validation",
                          "candidates to it", "time to it", "file (SHA-256)"], rows, numeric=(3, 4, 5, 6, 8, 9),
                         row_attrs=attrs)
    return Section("best", "Best kernels", body)


def baseline_id(data, case_name):
    """The id of a case's baseline (``<case>_ID0`` unless its beam entry says otherwise)."""
    return data.baseline(case_name).get("id") or f"{case_name}_ID0"


def _attr(value):
    return repr(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def progress_section(data):
    """Best speedup so far against candidates evaluated, one curve per case."""
    series = [(name,) + data.progress(name) for name in data.case_names()]
    series = [s for s in series if len(s[1]) > 1]
    if not series:
        return Section("progress", "Search progress", markup.tag("p", "No candidate was scored.", class_="note"))
    body = charts.step_lines(series, "Best speedup so far", "candidates evaluated (per case, in scoring order)",
                             "best speedup vs baseline (x)",
                             "Each dot is a new best kernel; failed candidates count as evaluated.", reference=1.0)
    return Section("progress", "Search progress", body)


def engines_section(data):
    """Engine busy time and HBM traffic of the baseline and of the best kernel per case."""
    labels, metrics, latencies = [], [], []
    for row in data.rows:
        baseline, winner = data.baseline(row["case_name"]), data.winner(row)
        for tag_name, entry in (("baseline", baseline), ("best", winner)):
            labels.append(f"{row['case_name']} · {tag_name}")
            metrics.append(entry.get("metrics") or {})
            latencies.append(_num(entry.get("latency_ms")))
    if not metrics_charts.has_engine_data(metrics):
        return Section("engines", "Engines and HBM traffic",
                       markup.tag("p", "No engine metrics were recorded for these kernels.", class_="note"))
    body = metrics_charts.engines_chart(labels, metrics, latencies, "Engine busy time: baseline vs best",
                                        "Busy time of each engine for the baseline and the best kernel; the tick is the latency.")
    body += metrics_charts.hbm_chart(labels, metrics, "HBM traffic: baseline vs best",
                                     "Bytes read from and written to HBM by the baseline and the best kernel.")
    return Section("engines", "Engines and HBM traffic", body)


def outcomes_section(data):
    """Candidates per case by outcome: correct or the error kind."""
    counters = {name: data.outcomes(name) for name in data.case_names()}
    kinds = sorted({k for c in counters.values() for k in c}, key=lambda k: (k != "correct", k))
    if not kinds:
        return Section("outcomes", "Candidate outcomes", markup.tag("p", "No candidate was scored.", class_="note"))
    labels = list(counters)
    segments = [(kind, [counters[name].get(kind, 0) for name in labels],
                 charts.OK_COLOR if kind == "correct" else charts.PALETTE[(i + 1) % len(charts.PALETTE)])
                for i, kind in enumerate(kinds)]
    body = charts.stacked_bars(labels, segments, "Candidates by outcome", "candidates",
                               "Candidates of each case: correct, or the kind of error that rejected them.")
    rows = [(markup.esc(name),) + tuple(markup.esc(counters[name].get(k, 0)) for k in kinds) +
            (markup.esc(sum(counters[name].values())),) for name in labels]
    body += markup.table(["case"] + kinds + ["total"], rows, numeric=tuple(range(1, len(kinds) + 2)))
    return Section("outcomes", "Candidate outcomes", body)


def spend_caps_text(spend):
    """One line on the LLM spend caps and what the run spent (optimize_results.json ``spend``; docs/llm.md
    "Spend caps"), or "" when the report has none."""
    if not isinstance(spend, dict) or not isinstance(spend.get("caps"), dict):
        return ""

    def scope(caps):
        parts = []
        for key, unit in (("requests", "requests"), ("tokens", "tokens"), ("usd", "USD")):
            value = (caps or {}).get(key)
            if value is None:
                parts.append(f"no {key} cap")
            else:
                parts.append(f"{value:g} {unit}" if key == "usd" else f"{int(value)} {unit}")
        return " / ".join(parts)

    run = spend.get("run") or {}
    text = (f"Spend caps (endpoint {spend.get('endpoint', '?')}): per problem {scope(spend['caps'].get('problem'))}; "
            f"per run {scope(spend['caps'].get('run'))}. Spent: {run.get('requests', 0)} requests, "
            f"{run.get('tokens', 0)} tokens, {run.get('usd', 0.0):.4f} USD")
    if run.get("refused"):
        text += f", {run['refused']} refused (not sent)"
    if run.get("stopped"):
        text += f". The run's cap ended the search: {run['stopped']}"
    return text + "."


def llm_section(run, data):
    """LLM requests, tokens and cost: per stage (run.json) and per case (optimize_results.json)."""
    usage = run.llm_usage()
    total = usage.get("total") or data.report.get("llm") or {}
    mode = data.report.get("mode", "")
    if not total.get("requests") and not total.get("failed_requests") and not total.get("failed"):
        text = "No LLM requests" + (f" (mode {mode}: the rule-based proposer)" if mode == "rules" else "") + "."
        return Section("llm", "LLM usage", markup.tag("p", markup.esc(text), class_="note"))
    by_stage = usage.get("by_stage") or {}
    body = ""
    if by_stage:
        stages = list(by_stage)
        body += charts.stacked_bars(stages, [("prompt tokens", [by_stage[s].get("prompt_tokens", 0) for s in stages], "#4e79a7"),
                                             ("completion tokens", [by_stage[s].get("completion_tokens", 0) for s in stages], "#f28e2b")],
                                    "LLM tokens per stage", "tokens", "Prompt and completion tokens of each LLM stage.")
        rows = [(markup.esc(s), markup.esc(u.get("requests", 0)), markup.esc(u.get("failed_requests", 0)),
                 markup.esc(u.get("replayed_requests", 0)), markup.esc(u.get("prompt_tokens", 0)),
                 markup.esc(u.get("completion_tokens", 0)), markup.fmt(u.get("cost_usd", 0.0), 4))
                for s, u in list(by_stage.items()) + [("total", total)]]
        body += markup.table(["stage", "requests", "failed", "replayed", "prompt tokens", "completion tokens", "cost USD"],
                             rows, numeric=(1, 2, 3, 4, 5, 6))
    case_rows = []
    for row in data.rows:
        u = row.get("llm") or {}
        case_rows.append((markup.esc(row["case_name"]), markup.esc(u.get("requests", 0)), markup.esc(u.get("failed", 0)),
                          markup.esc(u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)), markup.fmt(u.get("cost_usd", 0.0), 4),
                          markup.esc(row.get("stopped") or "")))
    if case_rows:
        body += markup.tag("h3", "Per case") + markup.table(["case", "requests", "failed", "tokens", "cost USD", "stopped by"],
                                                            case_rows, numeric=(1, 2, 3, 4))
    caps = spend_caps_text(data.report.get("spend"))
    if caps:
        body += markup.tag("p", markup.esc(caps), class_="note")
    models = ", ".join(sorted((usage.get("by_model") or {}).keys()))
    if models:
        body += markup.tag("p", markup.esc("Models: " + models), class_="note")
    return Section("llm", "LLM usage", body)


def _kernel_link(path, base_dir, text):
    return markup.link(text, markup.rel_href(path, base_dir)) if path else markup.esc(text)


def lineage_section(data, base_dir):
    """Per case: the steps from the baseline to the best kernel, and the baseline -> best diff."""
    parts = []
    for row in data.rows:
        name = row["case_name"]
        baseline, winner = data.baseline(name), data.winner(row)
        history = (row.get("winner") or {}).get("history") or winner.get("history") or []
        steps = [(markup.esc("baseline"), _kernel_link(baseline.get("kernel"), base_dir, baseline.get("id") or f"{name}_ID0"),
                  "-", markup.fmt(baseline.get("latency_ms") or row.get("original_latency_ms")), "-", "-")]
        for index, step in enumerate(history, start=1):
            record = data.records_by_id.get(step.get("candidate")) or data.entries.get(step.get("candidate")) or {}
            plan = step.get("title") or step.get("plan_id") or "?"
            extra = f" [{step['rule']}]" if step.get("rule") else ""
            steps.append((markup.esc(f"step {index} ({step.get('origin', '')})"),
                          _kernel_link(record.get("kernel"), base_dir, step.get("candidate", "?")),
                          markup.esc(plan + extra), markup.fmt(record.get("latency_ms")),
                          markup.fmt_x(record.get("speedup")), markup.fmt_x(record.get("speedup_vs_baseline"))))
        content = markup.table(["step", "kernel", "plan / move", "latency ms", "vs parent", "vs baseline"], steps,
                               numeric=(3, 4, 5))
        # Only files inside the run are read (run_files.read_bytes): a run names paths anywhere.
        before = data.baseline_text(name)
        after = data.kernel_text(data.best_kernel(row))  # best/<case>.py: the file the run kept
        if history and before and after:
            added, removed = diffview.diff_stats(before, after)
            content += markup.tag("p", markup.esc(f"Baseline → best: +{added} / -{removed} lines."), class_="note")
            content += diffview.diff_markup(before, after, f"baseline ({os.path.basename(baseline.get('kernel', ''))})",
                                            f"best ({winner.get('id', '')}: {data.best_kernel(row)})")
        elif not history:
            content += markup.tag("p", markup.esc("The baseline is still the best kernel" +
                                                  (f": {row['reason']}." if row.get("reason") else ".")), class_="note")
        summary = markup.tag("summary", markup.esc(f"{name}: {markup.fmt_x(row.get('speedup'))} in {len(history)} step(s)"))
        parts.append(markup.tag("details", summary + content, open="open" if len(parts) < 3 else None))
    return Section("lineage", "Baseline → best: lineage and diff", "".join(parts))


def candidates_section(data, base_dir):
    """Every candidate with its outcome and links to its files, grouped by case."""
    profile_dirs = data.profile_dirs()
    parts = []
    for name in data.case_names():
        rows = []
        for record in data.records_of(name):
            kernel = record.get("kernel")
            files = []
            if kernel:
                files.append(_kernel_link(kernel, base_dir, "py"))
                sidecar = os.path.splitext(kernel)[0] + ".json"
                if data.run.exists(sidecar):
                    files.append(_kernel_link(sidecar, base_dir, "json"))
            if record.get("id") in profile_dirs:
                files.append(markup.link("profile", markup.rel_href(data.run.path(profile_dirs[record["id"]]), base_dir)))
            ok = record.get("status") == "ok"
            error = record.get("error") or {}
            outcome = markup.badge("ok", "ok") if ok else markup.badge(error.get("kind", "failed"), "bad")
            plan = (record.get("plan") or {}).get("title") or ""
            rows.append((markup.esc(record.get("id", "?")), markup.esc(record.get("iteration", "")),
                         markup.esc(record.get("parent", "")), markup.esc(plan[:90]), outcome, markup.fmt(record.get("latency_ms")),
                         markup.fmt_x(record.get("speedup_vs_baseline")), " ".join(files),
                         markup.esc("" if ok else (error.get("message") or "")[:160])))
        if not rows:
            continue
        table = markup.table(["candidate", "iter", "parent", "plan", "outcome", "latency ms", "vs baseline", "files", "error"],
                             rows, numeric=(1, 5, 6))
        parts.append(markup.tag("details", markup.tag("summary", markup.esc(f"{name}: {len(rows)} candidates")) + table))
    if not parts:
        parts.append(markup.tag("p", "No candidate was scored.", class_="note"))
    return Section("candidates", "All candidates", "".join(parts))
