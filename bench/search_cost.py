"""What a candidate cost inside a finished (or stopped) search, per problem (issue 14).

    /usr/bin/python3.11 bench/search_cost.py RUN_DIR [--workers 2]

Reads the profile records a search wrote (``stages/**/profile.json`` below
its loop; the baseline stage is left out) and prints, per problem: the
candidates profiled, how many were confirmed, the mean wall time per
candidate (screen + confirmation), where a screen's time went (hidden draw,
kernel emulation, transfer to and from the worker, judging), the host's
reference ``forward`` for the hidden set measured in the same candidates
(one BLAS thread, beside the workers: the same conditions), the median
ratio of a candidate's wall time to that reference time, and candidates per
hour if the ``--workers`` workers profiled only that problem. Nothing is
re-run: it costs no CPU and reads runs of any size.
"""
import argparse
import collections
import glob
import json
import os
import statistics
import sys


def records(run_dir):
    """(case name, profile record) of every candidate profiled inside the run's loops."""
    for path in sorted(glob.glob(os.path.join(run_dir, "stages", "*", "iter-*", "*", "item-*", "profile.json"))):
        try:
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            continue
        case = record.get("case") if isinstance(record.get("case"), dict) else {}
        yield case.get("case_name") or case.get("problem") or "?", record


def summarize(run_dir):
    """{case: {"n", "confirmed", "wall_s", "draw_s", "run_s", "transfer_s", "judge_s", "reference_s",
    "ratio"}}: means over the candidates (seconds), ratio = median wall / reference."""
    rows = collections.defaultdict(list)
    for name, record in records(run_dir):
        timings = record.get("timings") or {}
        wall = record.get("wall_s")
        if not isinstance(wall, (int, float)) or wall <= 0:
            continue
        rows[name].append((wall, timings, record.get("validation") == "confirmed"))
    out = {}
    for name, items in rows.items():
        def mean_ms(key):
            return statistics.fmean(t.get(key, 0.0) or 0.0 for _, t, _ in items) / 1e3
        references = [(w, t["reference_ms"] / 1e3) for w, t, _ in items
                      if isinstance(t.get("reference_ms"), (int, float)) and t["reference_ms"] > 0]
        out[name] = {"n": len(items), "confirmed": sum(c for _, _, c in items),
                     "wall_s": statistics.fmean(w for w, _, _ in items), "draw_s": mean_ms("draw_ms"),
                     "run_s": mean_ms("run_ms"), "transfer_s": mean_ms("transfer_ms"), "judge_s": mean_ms("judge_ms"),
                     "reference_s": statistics.fmean(r for _, r in references) if references else None,
                     "ratio": statistics.median(w / r for w, r in references) if references else None}
    return out


def main(argv=None):
    """Prints the table; returns 1 when the run holds no candidate records."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--workers", type=int, default=2, help="the search's workers (for candidates per hour)")
    args = ap.parse_args(argv)
    table = summarize(args.run_dir)
    if not table:
        print(f"{args.run_dir}: no candidate profile records under stages/*/iter-*/")
        return 1
    print(f"{'problem':36s} {'cands':>5s} {'conf':>4s} {'wall s':>7s} {'draw':>6s} {'run':>6s} {'xfer':>6s} "
          f"{'judge':>6s} {'ref s':>6s} {'ratio':>6s} {'cand/h':>7s}")
    for name, r in sorted(table.items()):
        ref = f"{r['reference_s']:6.2f}" if r["reference_s"] else f"{'-':>6s}"
        ratio = f"{r['ratio']:6.1f}" if r["ratio"] else f"{'-':>6s}"
        print(f"{name[:36]:36s} {r['n']:5d} {r['confirmed']:4d} {r['wall_s']:7.2f} {r['draw_s']:6.2f} {r['run_s']:6.2f} "
              f"{r['transfer_s']:6.2f} {r['judge_s']:6.2f} {ref} {ratio} {3600 * args.workers / r['wall_s']:7.0f}")
    ratios = [r["ratio"] for r in table.values() if r["ratio"]]
    total = sum(r["n"] for r in table.values())
    print(f"{total} candidates; median ratio {statistics.median(ratios):.1f}, worst {max(ratios):.1f} "
          f"(wall time per candidate / the reference forward measured beside it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
