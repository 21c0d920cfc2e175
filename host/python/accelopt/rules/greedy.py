"""Greedy search with the rule vocabulary: propose -> apply -> profile, keep the best improvement.

Command line (PYTHONPATH=host/python)::

    /usr/bin/python3.11 -m accelopt.rules.greedy nkibench silu small [--rounds 4] [--max-plans 8]

``problem`` may be a comma-separated list or ``all``. Each round profiles
the top ``max_plans`` plans for the current kernel on the emulator (5-seed
correctness check + estimated latency) and keeps the fastest correct one if
it beats the current latency; it stops when a round finds nothing better.
"""
import argparse
import json
import os
import sys
import tempfile

from .. import nkibench, profile
from .api import apply, propose


def _profile(kernel_path, case, target):
    req = nkibench.profile_request(case, backend="emulator", target=target)
    req["kernel"] = kernel_path
    return profile.profile_kernel(req)


def search(case, rounds=4, max_plans=8, seed=0, target="trn1", min_gain=0.001, log=None, workdir=None):
    """Greedy search on one NKIBench case (``accelopt.nkibench.Case``).

    Returns {"problem", "case", "baseline_ms", "best_ms", "speedup", "chain":
    [{"id", "description", "latency_ms"}], "source", "evaluated", "rejected"}.
    A candidate is kept only if it is correct on all seeds and at least
    ``min_gain`` (relative) faster than the current kernel.
    """
    log = log or (lambda _msg: None)
    with open(case.kernel, encoding="utf-8") as handle:
        source = handle.read()
    base = _profile(case.kernel, case, target)
    if not base["correct"] or base["latency_ms"] is None:
        raise RuntimeError(f"baseline kernel of {case.problem}/{case.case_id} fails: {base['error']}")
    best_ms, metrics = base["latency_ms"], base["metrics"]
    log(f"{case.problem}/{case.case_id}: baseline {best_ms:.4f} ms (bottleneck {metrics.get('bottleneck')})")
    chain, history = [], []
    evaluated = rejected = 0
    own_dir = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="accelopt_greedy_")
    try:
        for rnd in range(rounds):
            plans = propose({"source": source, "metrics": metrics, "max_plans": max_plans, "seed": seed,
                             "history": history})["plans"]
            winner = None
            for i, plan in enumerate(plans):
                history.append(plan["id"])
                res = apply({"source": source, "plan": plan})
                if "error" in res:
                    log(f"  r{rnd} {plan['id']}: {res['error']['kind']}: {res['error']['message']}")
                    continue
                path = os.path.join(workdir, f"{case.problem}_r{rnd}_{i}.py")
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(res["source"])
                result = _profile(path, case, target)
                evaluated += 1
                if not result["correct"] or result["latency_ms"] is None:
                    rejected += 1
                    kind = result["error"]["kind"] if result["error"] else "incorrect"
                    log(f"  r{rnd} {plan['id']}: rejected ({kind})")
                    continue
                ms = result["latency_ms"]
                log(f"  r{rnd} {plan['id']}: {ms:.4f} ms")
                if ms < best_ms * (1.0 - min_gain) and (winner is None or ms < winner[1]):
                    winner = (plan, ms, res["source"], result["metrics"])
            if winner is None:
                break
            plan, ms, source, metrics = winner
            chain.append({"id": plan["id"], "description": plan["description"], "latency_ms": ms})
            log(f"  round {rnd}: keep {plan['id']} -> {ms:.4f} ms")
            best_ms = ms
            history = []  # a new kernel: every move may be worth trying again
    finally:
        if own_dir:
            for name in os.listdir(workdir):
                os.unlink(os.path.join(workdir, name))
            os.rmdir(workdir)
    return {"problem": case.problem, "case": case.case_id, "baseline_ms": base["latency_ms"],
            "best_ms": best_ms, "speedup": base["latency_ms"] / best_ms, "chain": chain, "source": source,
            "evaluated": evaluated, "rejected": rejected}


def main(argv=None):
    """CLI entry point; prints one summary line per case (and the chain). Returns an exit code."""
    ap = argparse.ArgumentParser(prog="python -m accelopt.rules.greedy", description=__doc__.split("\n")[0])
    ap.add_argument("root", help="NKIBench directory (holds summary.json)")
    ap.add_argument("problem", help="problem name, comma-separated names, or 'all'")
    ap.add_argument("case", nargs="?", default="small", help="case id (default: small)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--max-plans", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target", default="trn1", choices=["trn1", "trn2"])
    ap.add_argument("--out", help="directory to write each best kernel to (<problem>_best.py)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("-v", "--verbose", action="store_true", help="log every candidate")
    args = ap.parse_args(argv)
    problems = None if args.problem == "all" else args.problem.split(",")
    cases = nkibench.iter_cases(args.root, problems=problems, case_ids=[args.case])
    if not cases:
        print(f"no case {args.case!r} for {args.problem!r} in {args.root}", file=sys.stderr)
        return 2
    log = (lambda m: print(m, flush=True)) if args.verbose else None
    results = []
    for case in cases:
        res = search(case, rounds=args.rounds, max_plans=args.max_plans, seed=args.seed,
                     target=args.target, log=log)
        results.append(res)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, f"{case.problem}_best.py"), "w", encoding="utf-8") as handle:
                handle.write(res["source"])
        if not args.json:
            gain = 100.0 * (1.0 - res["best_ms"] / res["baseline_ms"])
            print(f"{case.problem}/{case.case_id}: {res['baseline_ms']:.4f} ms -> {res['best_ms']:.4f} ms "
                  f"({gain:.1f}% faster, {res['evaluated']} candidates profiled, {res['rejected']} rejected)")
            for step in res["chain"]:
                print(f"    {step['id']}: {step['latency_ms']:.4f} ms  ({step['description']})")
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k != "source"} for r in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
