"""Monotonicity of the cost model on the 14 published NKIBench baselines (issue 35).

Usage: /usr/bin/python3.11 bench/monotone.py PUBLISHED_NKIBENCH_DIR --cache DIR [kernel ...]
           [--mutations N] [--no-shrink]

The slow variant of tests/python/emulator/test_cost_monotone.py: replays the
instruction records cached by bench/calibrate.py (same ``--cache``; traced
first when missing) with, in turn, one record deleted (its readers then find no
writer) or halved, for an even spread of N records per kernel (default 40;
0 = every record), and reports every mutation that raises the estimate, with
the smallest part of the trace that still shows it. Exits 1 if any does.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calibrate  # noqa: E402 - the bench directory is on the path now

import nki_emu  # noqa: E402
from nki_emu.cost import monotone, targets  # noqa: E402


def main(argv):
    opts = {"cache": None, "n": 40, "shrink": True, "args": []}
    it = iter(argv)
    for a in it:
        if a == "--cache":
            opts["cache"] = next(it, None)
        elif a == "--mutations":
            opts["n"] = int(next(it))
        elif a == "--no-shrink":
            opts["shrink"] = False
        else:
            opts["args"].append(a)
    if not opts["args"] or not opts["cache"]:
        print(__doc__, file=sys.stderr)
        return 2
    root, wanted = opts["args"][0], opts["args"][1:]
    nki_emu.install()
    target = targets.get("trn1")
    summary = json.load(open(os.path.join(root, "summary.json")))
    bad = 0
    for name, entry in summary.items():
        if wanted and name not in wanted:
            continue
        records, counters = calibrate.trace_kernel(root, name, entry, opts["cache"], False)
        stride = max(1, -(-len(records) // opts["n"])) if opts["n"] else 1
        t0 = time.time()
        found = monotone.violations(records, counters, target, shrink=opts["shrink"], stride=stride)
        tried = sum(1 for _ in monotone.mutations(records, opts["shrink"], stride))
        print(f"{name:24s} {len(records):7d} records  {tried:4d} mutations  {len(found)} raise the estimate  "
              f"({time.time() - t0:.0f} s)", flush=True)
        for what, base, after, mutate in found[:3]:
            small = monotone.minimize(records, mutate, target)
            print(f"    {what}: {base / 1e6:.4f} -> {after / 1e6:.4f} ms; smallest part showing it: "
                  f"{len(small)} records")
            for rec in small[:20]:
                print(f"      {rec[:4]}")
        bad += len(found)
    print("monotone on every mutation tried" if not bad else f"{bad} mutation(s) raise the estimate")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
