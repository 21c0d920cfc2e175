"""Host time to propose rule moves per NKIBench baseline, with and without the walk cache (issue 14).

    /usr/bin/python3.11 bench/rule_speed.py                        # this repository's nkibench/
    /usr/bin/python3.11 bench/rule_speed.py /path/to/published/NKIBench --repeat 3

A search proposes moves for every new kernel in the host's embedded Python
(``accelopt.rules.propose``, every rule of the vocabulary) while the workers
wait, so this time sits on the search's critical path. For each full-size
baseline the propose call is timed with the cache of ``accelopt.rules.walk``
(the default) and without it (``KEEP = 0``), alternately, best of
``--repeat``; the table prints both and their ratio, measured in this run.
Both settings must give the same plans (checked; exit status 1 otherwise).
Latest output: docs/benchmarks/rule-speed.txt.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host", "python"))

from accelopt import nkibench  # noqa: E402
from accelopt.rules import walk  # noqa: E402
from accelopt.rules.api import propose  # noqa: E402


def timed(source, keep):
    """(seconds, plans) of one propose call over every rule with walk.KEEP = ``keep``."""
    saved = walk.KEEP
    walk.KEEP = keep
    try:
        start = time.perf_counter()
        plans = propose({"source": source, "max_plans": 10000})["plans"]
        return time.perf_counter() - start, plans
    finally:
        walk.KEEP = saved


def main(argv=None):
    """Prints the table; returns 0, or 1 when the cache changed some kernel's plans."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                            "nkibench"))
    ap.add_argument("--repeat", type=int, default=1, help="timings per setting (best kept)")
    args = ap.parse_args(argv)
    print(f"{'problem':24s} {'plans':>5s} {'cached s':>9s} {'uncached s':>10s} {'ratio':>6s}")
    total_cached = total_plain = 0.0
    differ = 0
    for case in nkibench.iter_cases(args.root):
        if case.case_id == "small":
            continue
        with open(case.kernel, encoding="utf-8") as handle:
            source = handle.read()
        cached, plain = [], []
        for _ in range(max(1, args.repeat)):
            seconds, with_cache = timed(source, walk.KEEP)
            cached.append(seconds)
            seconds, without = timed(source, 0)
            plain.append(seconds)
            differ += with_cache != without
        total_cached += min(cached)
        total_plain += min(plain)
        print(f"{case.problem:24s} {len(with_cache):5d} {min(cached):9.2f} {min(plain):10.2f} "
              f"{min(plain) / max(min(cached), 1e-9):6.1f}")
    print(f"{'all':24s} {'':5s} {total_cached:9.2f} {total_plain:10.2f} {total_plain / max(total_cached, 1e-9):6.1f}")
    if differ:
        print(f"the cache changed the plans of {differ} call(s)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
