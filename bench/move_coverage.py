"""Applicable rule moves per NKIBench baseline (issue 17 target: at least 5 per published baseline).

    /usr/bin/python3.11 bench/move_coverage.py                        # this repository's nkibench/
    /usr/bin/python3.11 bench/move_coverage.py /path/to/published/NKIBench

Prints one line per problem (full-size cases; the small ones share the kernel):
plans, distinct rules, and the plans per rule. Exit status 1 when a baseline
offers fewer than the target. Latest output: docs/benchmarks/move-coverage.txt.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host", "python"))

from accelopt.rules import coverage as C  # noqa: E402


def main(argv=None):
    """Prints the coverage table; returns 0 when every baseline reaches the target, else 1."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                            "nkibench"))
    ap.add_argument("--target", type=int, default=C.TARGET)
    args = ap.parse_args(argv)
    rows = [r for r in C.coverage(args.root) if r["case"] != "small"]
    short = 0
    for r in sorted(rows, key=lambda r: r["problem"]):
        mark = "ok" if r["plans"] >= args.target else "SHORT"
        short += mark == "SHORT"
        rules = ", ".join(f"{k} {v}" for k, v in sorted(r["rules"].items()))
        print(f"{r['problem']:24s} {r['plans']:3d} plans {len(r['rules']):2d} rules  {mark:5s}  {rules}")
    print(f"{len(rows) - short}/{len(rows)} baselines offer >= {args.target} moves")
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
