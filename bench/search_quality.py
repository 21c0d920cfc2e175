"""Search quality without an LLM: rule-based search with a budget of candidates per problem (issue 17).

    /usr/bin/python3.11 bench/search_quality.py /path/to/published/NKIBench [--budget 40]
        [--problems silu,rmsnorm_matmul,add_rmsnorm_matmul,mamba,matmul_add_rmsnorm | all]
        [--pipeline mcgs|beam] [--build build] [--run-dir runs] [--report RUN_DIR]

Runs ``accelopt-host run`` on ``pipelines/nkibench-mcgs.yaml`` (budgeted graph
search, ``vars.budget``) or, with ``--pipeline beam`` (or when the MCGS
pipeline is missing), ``pipelines/nkibench-optimize.yaml`` with 3 iterations of
8 plans and a beam of 2 (8 + 16 + 16 = 40 candidates at most), always with
``vars.mode=rules`` on the full-size cases. Every candidate goes through the
pipeline's profile stage (sandboxed worker, 5 seeds + hidden set, anti-cheat
rules), as LLM candidates do. Then prints per problem: baseline and best
estimated latency (ms), speedup, AccelOpt's measured speedup on trn1 (its
gpt-oss-120b run, docs/rules.md "Search quality"), % of peak before and after,
candidates profiled, and the geomean; then, per improved problem, the winning
chain of moves with the documented effect each relies on, and the baseline's
and best kernel's metrics (re-profiled with ``accelopt-host profile``) that
show it. ``--report RUN_DIR`` only re-reads a finished run. Latest output:
docs/benchmarks/search-quality.txt.
"""
import argparse
import glob
import hashlib
import json
import math
import os
import subprocess
import sys
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FIVE = ["silu", "rmsnorm_matmul", "add_rmsnorm_matmul", "mamba", "matmul_add_rmsnorm"]
# native:mcgs_backprop's min_gain default (docs/search.md, "Incumbent")
MIN_GAIN = 0.005
# AccelOpt's committed NKIBench run on trn1 (gpt-oss-120b): best speedup per problem
# (its repository, experiments/full_complete_local/results/11110904_best_plan_id.csv; issue 17)
ACCELOPT = {"adamw": 1.059, "add_rmsnorm_matmul": 1.158, "bmm": 1.064, "bmm_softmax": 1.000, "gqa_full": 1.106,
            "lora": 1.000, "mamba": 1.268, "matmul": 0.997, "matmul_add_rmsnorm": 1.000, "rmsnorm_matmul": 1.056,
            "rope_single_freq_apply": 1.300, "silu": 1.671, "swiglu": 1.000, "transpose_matmul": 1.027}


def _command(args, problems):
    mcgs = os.path.join(REPO, "pipelines", "nkibench-mcgs.yaml")
    use_mcgs = args.pipeline == "mcgs" and os.path.exists(mcgs)
    sets = [f"vars.nkibench={os.path.abspath(args.nkibench)}", "vars.mode=rules", "vars.cases=full",
            "vars.rel_tol_overrides={mamba: 3.0e-5}", f"vars.problems=[{', '.join(problems)}]",
            f"vars.max_parallel={args.parallel}"]
    if use_mcgs:
        pipeline = mcgs
        sets += [f"vars.budget={args.budget}"]
    else:
        pipeline = os.path.join(REPO, "pipelines", "nkibench-optimize.yaml")
        sets += ["vars.iterations=3", "vars.plans=8", "vars.beam=2"]
    run = os.path.join(args.run_dir, time.strftime("%Y%m%d-%H%M%S") + f"-search-quality-{label_of(use_mcgs)}")
    cmd = [os.path.join(args.build, "accelopt-host"), "run", pipeline, "--run-dir", run]
    for s in sets:
        cmd += ["--set", s]
    return cmd, label_of(use_mcgs), run


def label_of(use_mcgs):
    """Pipeline label for the report ("mcgs" or "beam")."""
    return "mcgs" if use_mcgs else "beam"


def _profile(build, kernel, reference):
    """``accelopt-host profile --json`` (sandboxed worker) of one kernel: the metrics dict, or None."""
    cmd = [os.path.join(build, "accelopt-host"), "profile", kernel, "--reference", reference, "--json",
           "--rel-tol", "3e-5" if "mamba" in os.path.basename(kernel) else "2e-5"]
    try:
        text = subprocess.run(cmd, capture_output=True, text=True, timeout=900).stdout
        res = json.loads(text[text.index("{"):])
    except (subprocess.SubprocessError, ValueError):
        return None
    return res.get("metrics") if res.get("correct") else None


def _recorded_metrics(run):
    """{kernel file SHA-256: profile metrics} of every kernel the run profiled (baselines and candidates:
    stages/**/item-*/profile.json with the case its inputs.json names); read once, no re-run."""
    found = {}
    for path in glob.glob(os.path.join(run, "stages", "**", "item-*", "profile.json"), recursive=True):
        try:
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
            with open(os.path.join(os.path.dirname(path), "inputs.json"), encoding="utf-8") as handle:
                case = json.load(handle).get("with", {}).get("case") or {}
        except (OSError, ValueError):
            continue
        if record.get("correct") and isinstance(record.get("metrics"), dict) and case.get("kernel"):
            key = _file_key(case["kernel"])
            if key:
                found[key] = record["metrics"]
    return found


def _file_key(path):
    """SHA-256 of a kernel file's bytes (the report names copies of the profiled files), or None."""
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def effects(run, nkibench, build, rows, out=sys.stdout):
    """Prints, per improved problem, the winning chain of moves (each with the documented effect it
    relies on, accelopt.rules.effects) and the baseline's and best kernel's profile metrics that show
    the effect: engine busy ms, HBM bytes, DMA count, spilled bytes. The metrics are the run's own
    (its profile records of both kernels, the hidden set's traced run); a kernel without a record is
    re-profiled (``accelopt-host profile``)."""
    recorded = _recorded_metrics(run)
    sys.path.insert(0, os.path.join(REPO, "host", "python"))
    from accelopt import nkibench as nb  # noqa: E402 - the repository's Python
    from accelopt.rules.effects import EFFECTS  # noqa: E402
    cases = {c.case_name: c for c in nb.iter_cases(nkibench)}
    for r in rows:
        chain = (r.get("winner") or {}).get("history") or []
        case = cases.get(r.get("case_name"))
        if not chain or case is None or not r.get("kernel"):
            continue
        print(f"\n{r['problem']}: {r['original_latency_ms']:.4f} -> {r['best_latency_ms']:.4f} ms", file=out)
        for step in chain:
            print(f"  {step.get('rule_plan_id')}: {EFFECTS.get(step.get('rule'), '')}", file=out)
        before = recorded.get(_file_key(case.kernel)) or _profile(build, case.kernel, case.task)
        after = recorded.get(_file_key(r["kernel"])) or _profile(build, r["kernel"], case.task)
        if before is None or after is None:
            print("  (re-profiling failed)", file=out)
            continue
        for key, unit, scale in (("hbm_read_bytes", "MB", 1e-6), ("hbm_write_bytes", "MB", 1e-6),
                                 ("spill_save_bytes", "MB", 1e-6), ("dma_count", "", 1),
                                 ("instruction_count", "", 1)):
            print(f"  {key:18s} {before.get(key, 0) * scale:10.1f} -> {after.get(key, 0) * scale:10.1f} {unit}",
                  file=out)
        for eng in ("tensor", "vector", "scalar", "gpsimd", "dma"):
            b, a = before.get("engine_busy_ms", {}).get(eng, 0.0), after.get("engine_busy_ms", {}).get(eng, 0.0)
            if b or a:
                print(f"  busy {eng:13s} {b:10.3f} -> {a:10.3f} ms", file=out)
        print(f"  bottleneck         {before.get('bottleneck')} -> {after.get('bottleneck')}", file=out)


def _rows_from_records(run):
    """Report rows rebuilt from ``optimize/records.jsonl`` (the candidates of the finished iterations)
    when a run stopped before writing optimize_results.json; (rows, report header dict)."""
    by = {}
    with open(os.path.join(run, "optimize", "records.jsonl"), encoding="utf-8") as handle:
        for line in handle:
            rec = json.loads(line)
            by.setdefault(rec["problem"], []).append(rec)
    rows = []
    for problem, recs in by.items():
        base = recs[0]["baseline_latency_ms"]
        # A screened candidate passed only the screen's seeds: never a result (docs/search.md).
        ok = [r for r in recs if r.get("correct") and r.get("latency_ms") is not None
              and r.get("validation") != "screened"]
        best = None  # the search's incumbent rule: faster than the incumbent by more than MIN_GAIN, in order
        for r in ok:
            if r["latency_ms"] < (best["latency_ms"] if best else base) * (1 - MIN_GAIN):
                best = r
        best_ms = best["latency_ms"] if best else base
        peak_ms = ((best or recs[0]).get("peak") or {}).get("peak_ms")
        won = best is not None and best["latency_ms"] < base
        rows.append({"problem": problem, "case_name": recs[0]["case_name"], "original_latency_ms": base,
                     "best_latency_ms": best_ms, "speedup": base / best_ms,
                     "candidates": {"candidates": len(recs), "correct": len(ok)},
                     "percent_of_peak_before": 100.0 * peak_ms / base if peak_ms else None,
                     "percent_of_peak_after": 100.0 * peak_ms / best_ms if peak_ms else None,
                     "kernel": best["kernel"] if won else None,
                     "winner": {"history": best.get("history")} if won else None})
    return rows, {"mode": "rules (partial: optimize/records.jsonl)", "target": "trn1"}


def results_file(run):
    """The run's optimize_results.json, or optimize_report.json (its name in runs made before the rename)."""
    for name in ("optimize_results.json", "optimize_report.json"):
        if os.path.exists(os.path.join(run, name)):
            return os.path.join(run, name)
    return os.path.join(run, "optimize_results.json")


def report(run, pipeline_label, out=sys.stdout):
    """Prints the per-problem table of a run directory; returns the rows (list of dict). A run that
    stopped early is read from its records (the candidates of its finished iterations)."""
    path = results_file(run)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            rep = json.load(handle)
        rows = rep["rows"]
    else:
        rows, rep = _rows_from_records(run)
    rows = sorted(rows, key=lambda r: r["problem"])
    print(f"run {run} ({pipeline_label}, mode {rep.get('mode')}, target {rep.get('target')})", file=out)
    print(f"{'problem':24s} {'base ms':>9s} {'best ms':>9s} {'speedup':>8s} {'AccelOpt':>8s} {'>=AO':>4s} "
          f"{'peak% before':>12s} {'after':>6s} {'cands':>5s} {'ok':>4s}", file=out)
    logs, ao_logs, ge, peak_before, peak_after = [], [], 0, [], []
    for r in rows:
        if r.get("original_latency_ms") is None:
            print(f"{r['problem']:24s} baseline failed: {r.get('status', r.get('winner', '?'))}", file=out)
            continue
        sp = r.get("speedup") or 1.0
        ao = ACCELOPT.get(r["problem"])
        cand = r.get("candidates") or {}
        better = ao is not None and sp >= ao
        ge += better
        logs.append(math.log(sp))
        if ao:
            ao_logs.append(math.log(ao))
        pb, pa = r.get("percent_of_peak_before"), r.get("percent_of_peak_after")
        if pb is not None and pa is not None:
            peak_before.append(pb)
            peak_after.append(pa)
        print(f"{r['problem']:24s} {r['original_latency_ms']:9.4f} {r['best_latency_ms']:9.4f} {sp:8.3f} "
              f"{(ao or float('nan')):8.3f} {('yes' if better else 'no'):>4s} {(pb or float('nan')):12.1f} "
              f"{(pa or float('nan')):6.1f} {cand.get('candidates', 0):5d} {cand.get('correct', 0):4d}", file=out)
    if rows:
        geo = math.exp(sum(logs) / len(logs))
        geo_ao = math.exp(sum(ao_logs) / len(ao_logs)) if ao_logs else float("nan")
        print(f"geomean speedup {geo:.3f} (AccelOpt on the same problems {geo_ao:.3f}); at or above AccelOpt on "
              f"{ge} of {len(rows)}", file=out)
        if peak_before:
            print(f"average % of peak {sum(peak_before) / len(peak_before):.1f} -> "
                  f"{sum(peak_after) / len(peak_after):.1f}", file=out)
    return rows


def main(argv=None):
    """Runs the search (or re-reads ``--report``) and prints the table; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("nkibench", help="NKIBench directory (the published one for the issue's targets)")
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--problems", default=",".join(FIVE), help="comma-separated, or 'all'")
    ap.add_argument("--pipeline", choices=["mcgs", "beam"], default="mcgs")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--run-dir", default=os.path.join(REPO, "runs"))
    ap.add_argument("--parallel", type=int, default=2, help="candidates profiled at once")
    ap.add_argument("--report", help="re-read this finished run directory instead of running")
    ap.add_argument("--no-effects", action="store_true",
                    help="skip re-profiling the baseline and best kernels for the before/after metrics")
    args = ap.parse_args(argv)
    if args.report:
        rows = report(args.report, "report only")
        if not args.no_effects:
            effects(args.report, args.nkibench, args.build, rows)
        return 0
    problems = sorted(ACCELOPT) if args.problems == "all" else args.problems.split(",")
    cmd, label, run = _command(args, problems)
    os.makedirs(args.run_dir, exist_ok=True)
    print("$ " + " ".join(f"'{c}'" if " " in c or "{" in c else c for c in cmd), flush=True)
    started = time.time()
    rc = subprocess.call(cmd)
    if not os.path.exists(results_file(run)):
        print(f"no report (exit status {rc})", file=sys.stderr)
        return rc or 1
    print(f"wall time {time.time() - started:.0f} s, exit status {rc}")
    rows = report(run, label)
    if not args.no_effects:
        effects(run, args.nkibench, args.build, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
