"""Run kind ``profile``: a run that profiled a set of kernels once (pipelines/nkibench-profile.yaml).

Recognised by ``profile_results.json`` at the top of the run directory (a
list of ``{"case", "profile"}`` rows in the order of the profile stage's
items, written by ``native:profile_results``).
"""
import collections
import math
import os

from .. import charts
from .. import common
from .. import markup
from .. import metrics_charts
from ..page import Report, Section

KIND = "profile"
LABEL = "profile run"


def matches(run):
    """True when the run wrote profile_results.json."""
    return run.exists("profile_results.json")


def _rows(run):
    rows = run.json("profile_results.json", [])
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _latency(profile):
    value = profile.get("latency_ms", profile.get("latency"))
    return float(value) if isinstance(value, (int, float)) and profile.get("correct") else None


def _label(case):
    return case.get("case_name") or case.get("problem") or "?"


def summarize(run):
    """The index entry: one problem per profiled case (latency as both baseline and best)."""
    problems = []
    for row in _rows(run):
        case, profile = row.get("case") or {}, row.get("profile") or {}
        latency = _latency(profile)
        error = (profile.get("error") or {}).get("kind") if isinstance(profile.get("error"), dict) else None
        problems.append({"case_name": _label(case), "problem": case.get("problem", ""), "baseline_ms": latency,
                         "best_ms": latency, "speedup": None, "status": "correct" if latency is not None else (error or "failed")})
    return {"kind": KIND, "geomean_speedup": None, "problems": problems}


def _item_dirs(run):
    """case_name -> run-relative folder of its profile item (from the items' outputs.json)."""
    found = {}
    for outputs in run.glob("stages/*/item-*/outputs.json"):
        case = (run.json(outputs, {}) or {}).get("case") or {}
        if isinstance(case, dict) and case.get("case_name"):
            found.setdefault(case["case_name"], os.path.dirname(outputs))
    return found


def build(run, base_dir):
    """The report of a profile run."""
    rows = _rows(run)
    labels = [_label(r.get("case") or {}) for r in rows]
    profiles = [r.get("profile") or {} for r in rows]
    latencies = [_latency(p) for p in profiles]
    correct = sum(1 for v in latencies if v is not None)
    peaks = [((p.get("peak") or {}).get("percent_of_peak") if v is not None else None) for p, v in zip(profiles, latencies)]
    report = Report(title=f"{run.name()} — {run.id}", kind=KIND, subtitle=common.subtitle(run, LABEL))
    known_peaks = [p for p in peaks if p is not None]
    report.cards = [("kernels correct", f"{correct}/{len(rows)}"),
                    ("median % of peak", f"{sorted(known_peaks)[len(known_peaks) // 2]:.1f}%" if known_peaks else "-"),
                    ("geomean latency", f"{math.exp(sum(math.log(v) for v in latencies if v) / correct):.4g} ms" if correct else "-"),
                    ("duration", markup.fmt_duration(run.duration_s()))]
    if not rows:
        report.warnings.append("profile_results.json holds no results")
    # A correct kernel without % of peak: say why (nkibench/README.md, "Peak model"), not a bare "-".
    no_peak = {}
    for row, profile, latency, peak in zip(rows, profiles, latencies, peaks):
        if latency is not None and peak is None:
            problem = (row.get("case") or {}).get("problem") or "?"
            no_peak.setdefault(problem, profile.get("peak_error") or "no peak model")
    for problem, why in no_peak.items():
        report.warnings.append(f"no % of peak for problem {problem!r}: {why}")
    builders = [lambda: _latency_section(labels, profiles, latencies, peaks),
                lambda: _engines_section(labels, profiles, latencies),
                lambda: _outcomes(labels, profiles, latencies),
                lambda: _table(run, rows, latencies, peaks, base_dir),
                lambda: common.run_section(run, base_dir)]
    report.sections = common.safe_sections(report, builders)
    return report


def _latency_section(labels, profiles, latencies, peaks):
    estimated = any(p.get("estimated") for p in profiles)
    note = " (estimated by the NKI emulator's cost model)" if estimated else ""
    body = charts.bars(labels, latencies, "Latency per kernel", "latency (ms)", "Latency of each kernel" + note + "; "
                       "missing bars are kernels that failed.", value_format="{:.4g}")
    colors = [charts.ENGINE_COLORS["tensor"] if (p.get("peak") or {}).get("bound") == "mm" else
              charts.ENGINE_COLORS["dma"] if (p.get("peak") or {}).get("bound") == "memory" else charts.ENGINE_COLORS["vector"]
              for p in profiles]
    body += charts.bars(labels, peaks, "% of peak", "% of the peak-latency model (higher is better)",
                        "Peak latency / latency (accelopt.peak); colour = bound: blue mm, brown memory, orange vector.",
                        value_format="{:.1f}%", colors=colors)
    return Section("latency", "Latency and % of peak", body)


def _engines_section(labels, profiles, latencies):
    if not metrics_charts.has_engine_data(profiles):
        return None
    body = metrics_charts.engines_chart(labels, profiles, latencies, "Engine busy time",
                                        "Busy time of each engine per kernel; the tick is the kernel's latency.")
    body += metrics_charts.hbm_chart(labels, profiles, "HBM traffic", "Bytes each kernel reads from and writes to HBM.")
    return Section("engines", "Engines and HBM traffic", body)


def _outcomes(labels, profiles, latencies):
    kinds = collections.Counter()
    for profile, latency in zip(profiles, latencies):
        error = profile.get("error")
        kinds["correct" if latency is not None else (error.get("kind") if isinstance(error, dict) else "failed")] += 1
    names = sorted(kinds, key=lambda k: (k != "correct", -kinds[k]))
    colors = [charts.OK_COLOR if n == "correct" else charts.PALETTE[(i + 2) % len(charts.PALETTE)] for i, n in enumerate(names)]
    body = charts.bars(names, [kinds[n] for n in names], "Outcomes", "kernels", "Kernels by outcome (error kind when not correct).",
                       value_format="{:d}", colors=colors)
    return Section("outcomes", "Outcomes by error kind", body)


def _table(run, rows, latencies, peaks, base_dir):
    items = _item_dirs(run)
    table_rows = []
    for row, latency, peak in zip(rows, latencies, peaks):
        case, profile = row.get("case") or {}, row.get("profile") or {}
        error = profile.get("error") if isinstance(profile.get("error"), dict) else None
        status = markup.badge("correct", "ok") if latency is not None else markup.badge((error or {}).get("kind", "failed"), "bad")
        links = []
        if case.get("kernel"):
            links.append(markup.link("kernel", markup.rel_href(case["kernel"], base_dir)))
        if items.get(case.get("case_name")):
            links.append(markup.link("profile", markup.rel_href(run.path(items[case["case_name"]]), base_dir)))
        message = markup.esc((error or {}).get("message", "")[:300])
        table_rows.append((markup.esc(case.get("problem", "")), markup.esc(_label(case)), status, markup.fmt(latency),
                           markup.fmt(peak, 3, "%") if peak is not None else "-",
                           markup.esc((profile.get("peak") or {}).get("bound", "")), markup.esc(profile.get("bottleneck", "")),
                           " ".join(links), message))
    body = markup.table(["problem", "case", "result", "latency ms", "% peak", "bound", "bottleneck", "files", "error"],
                        table_rows, numeric=(3, 4))
    return Section("kernels", "Kernels", body)
