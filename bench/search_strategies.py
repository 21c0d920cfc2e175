"""Beam vs Monte-Carlo graph search vs reflexion agent at equal budget, rules mode (docs/search.md).

    /usr/bin/python3.11 bench/search_strategies.py [--budget 20] [--problems silu,rmsnorm_matmul,... | all]
        [--published /path/to/published/NKIBench] [--full-budget 12] [--build build] [--run-dir runs/bench]
        [--full-problems silu,rmsnorm_matmul] [--skip-small] [--parallel 2]
        [--out docs/benchmarks/search-strategies.txt]

For each case set - the small cases of nkibench/ (always) and, with
``--published``, the full-size published baselines of the same problems - runs
``accelopt-host run`` on ``pipelines/nkibench-optimize.yaml`` (beam: up to 16
iterations of 4 plans, beam 2, capped by ``vars.budget``),
``pipelines/nkibench-mcgs.yaml`` and ``pipelines/nkibench-agent.yaml``, all with
``vars.mode=rules``, the emulator and the same ``vars.budget`` (candidate
evaluations per problem). Every candidate goes through the pipelines' profile
stage (sandboxed workers). Prints per problem the best speedup and the
candidates profiled of each strategy, the geomean and the wall time of each run,
and writes the same text to ``--out``.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FIVE = ["silu", "rmsnorm_matmul", "add_rmsnorm_matmul", "mamba", "matmul_add_rmsnorm"]
STRATEGIES = {
    "beam": ("nkibench-optimize.yaml", ["vars.iterations=16", "vars.plans=4", "vars.beam=2"]),
    "mcgs": ("nkibench-mcgs.yaml", []),
    "agent": ("nkibench-agent.yaml", []),
}


def run_one(args, strategy, problems, budget, nkibench, cases, label):
    """Runs one pipeline; returns (run directory, seconds, exit code)."""
    pipeline, extra = STRATEGIES[strategy]
    run = os.path.join(args.run_dir, time.strftime("%Y%m%d-%H%M%S") + f"-{label}-{strategy}")
    sets = [f"vars.nkibench={nkibench}", f"vars.cases={cases}", "vars.mode=rules", f"vars.budget={budget}",
            f"vars.problems=[{', '.join(problems)}]", f"vars.max_parallel={args.parallel}", "backend.nki=emulator",
            "vars.rel_tol_overrides={mamba: 3.0e-5}"]
    if strategy == "agent":
        sets.append(f"vars.rounds={2 * budget}")
    cmd = [os.path.join(args.build, "accelopt-host"), "run", os.path.join(REPO, "pipelines", pipeline), "--run-dir", run]
    for s in sets + extra:
        cmd += ["--set", s]
    started = time.time()
    env = dict(os.environ, ACCELOPT_NO_PROGRESS="1")
    with open(os.path.join(args.run_dir, f"{label}-{strategy}.log"), "w", encoding="utf-8") as log:
        code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    return run, time.time() - started, code


def rows_of(run):
    """{problem: (speedup, candidates)} from a run's optimize_results.json ({} when missing)."""
    try:
        names = [n for n in ("optimize_results.json", "optimize_report.json")  # the second: its former name
                 if os.path.exists(os.path.join(run, n))] or ["optimize_results.json"]
        with open(os.path.join(run, names[0]), encoding="utf-8") as handle:
            report = json.load(handle)
    except (OSError, ValueError):
        return {}
    out = {}
    for row in report.get("rows", []):
        cands = row.get("candidates", {}).get("candidates", 0) if isinstance(row.get("candidates"), dict) else 0
        out[row.get("problem", row.get("case_name"))] = (row.get("speedup"), cands)
    return out


def table(label, budget, problems, results):
    """Text table of one case set."""
    lines = [f"## {label}: budget {budget} candidate evaluations per problem, rules mode, emulated trn1", ""]
    head = f"{'problem':<24}" + "".join(f"{s + ' speedup (cands)':>26}" for s in STRATEGIES)
    lines += [head, "-" * len(head)]
    logs = {s: [] for s in STRATEGIES}
    for p in problems:
        cells = []
        for s in STRATEGIES:
            speedup, cands = results[s]["rows"].get(p, (None, 0))
            if isinstance(speedup, (int, float)) and speedup > 0:
                logs[s].append(math.log(speedup))
                cells.append(f"{speedup:.3f}x ({cands})")
            else:
                cells.append("n/a")
        lines.append(f"{p:<24}" + "".join(f"{c:>26}" for c in cells))
    geo = [f"{math.exp(sum(v) / len(v)):.3f}x" if v else "n/a" for v in logs.values()]
    lines.append(f"{'geomean':<24}" + "".join(f"{g:>26}" for g in geo))
    secs = [f"{results[s]['seconds']:.0f} s (exit {results[s]['code']})" for s in STRATEGIES]
    lines.append(f"{'wall time':<24}" + "".join(f"{t:>26}" for t in secs))
    lines.append("runs: " + ", ".join(f"{s} {results[s]['run']}" for s in STRATEGIES))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, default=20)
    parser.add_argument("--full-budget", type=int, default=12, help="budget for the published full-size cases")
    parser.add_argument("--problems", default=",".join(FIVE))
    parser.add_argument("--published", default="", help="published NKIBench directory (full-size baselines)")
    parser.add_argument("--full-problems", default="", help="problems of the full-size set (default: --problems)")
    parser.add_argument("--skip-small", action="store_true", help="only the full-size set")
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--run-dir", default=os.path.join(REPO, "runs", "bench"))
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(REPO, "docs", "benchmarks", "search-strategies.txt"))
    args = parser.parse_args()
    args.run_dir = os.path.abspath(args.run_dir)
    os.makedirs(args.run_dir, exist_ok=True)
    problems = None if args.problems == "all" else [p.strip() for p in args.problems.split(",") if p.strip()]
    if problems is None:
        with open(os.path.join(REPO, "nkibench", "summary.json"), encoding="utf-8") as handle:
            summary = json.load(handle)
        problems = sorted({c.get("problem") for c in summary} if isinstance(summary, list) else set(summary))
    sets = [] if args.skip_small else [("small cases (nkibench/)", "small", os.path.join(REPO, "nkibench"), "small",
                                        args.budget, problems)]
    if args.published:
        full = [p.strip() for p in args.full_problems.split(",") if p.strip()] or problems
        sets.append(("published full-size baselines", "full", os.path.abspath(args.published), "full", args.full_budget, full))
    out = [f"# Search strategies at equal budget ({time.strftime('%Y-%m-%d')}, bench/search_strategies.py)", ""]
    for title, label, nkibench, cases, budget, chosen in sets:
        results = {}
        for strategy in STRATEGIES:
            run, seconds, code = run_one(args, strategy, chosen, budget, nkibench, cases, label)
            results[strategy] = {"run": os.path.relpath(run, REPO), "seconds": seconds, "code": code, "rows": rows_of(run)}
            print(f"{label} {strategy}: {seconds:.0f} s, exit {code}", file=sys.stderr)
        out += table(title, budget, chosen, results) + [""]
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    with open(args.out, "w", encoding="utf-8") as handle:
        handle.write(text)


if __name__ == "__main__":
    main()
