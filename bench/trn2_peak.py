"""The NKIBench problems' estimated latency and % of peak on trn2 next to trn1.

Usage: /usr/bin/python3.11 bench/trn2_peak.py NKIBENCH_DIR --cache DIR

Replays the instruction records that ``bench/calibrate.py NKIBENCH_DIR --cache DIR``
cached (seed-0 inputs, the first case of each problem; the records are target
independent) on the trn1 and trn2 targets of ``nki_emu.cost.targets`` and prints, per
problem, the estimated latency (ms), AccelOpt's % of peak (``accelopt.peak``: trn2
constants are documented per-core figures, unvalidated: nki-facts §3.1, §3.7), the
bottleneck engine, then the mean % of peak per target. AccelOpt's paper reports its
trn2 kernels at 45 % of peak on average before optimisation and 59 % after
(nki-facts §5.3, S8); no per-kernel trn2 measurement is public, so the trn2 column
is an estimate only. Output: docs/benchmarks/emulator-trn2.txt.
"""
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host", "python"))
from accelopt import peak as peak_model  # noqa: E402
from nki_emu.cost import tracer  # noqa: E402


def main(argv):
    if len(argv) != 3 or argv[1] != "--cache":
        raise SystemExit(__doc__)
    root, cache = argv[0], argv[2]
    with open(os.path.join(root, "summary.json"), encoding="utf-8") as handle:
        summary = json.load(handle)
    rows, percents = [], {"trn1": [], "trn2": []}
    for name, entry in summary.items():
        path = os.path.join(cache, name + ".pkl")
        if not os.path.exists(path):
            print(f"{name:24s} (no cached records: run bench/calibrate.py {root} --cache {cache} first)")
            continue
        with open(path, "rb") as handle:
            records, counters = pickle.load(handle)
        values = next(iter(entry["cases"].values()))["values"]
        row = [f"{name:24s}"]
        for target in ("trn1", "trn2"):
            profile = tracer.replay(records, counters, target)
            ms = profile["latency_ms"]
            pct = peak_model.percent_of_peak(ms, name, values, target)
            percents[target].append(pct)
            row.append(f"{target} {ms:8.3f} ms  {pct:5.1f} % of peak  ({profile['bottleneck']:6s})")
        rows.append("  ".join(row))
    print("\n".join(rows))
    for target, values in percents.items():
        if values:
            print(f"mean % of peak {target}: {sum(values) / len(values):.1f} % over {len(values)} problems")
    print("trn2 figures are unvalidated estimates (no public per-kernel trn2 measurement); AccelOpt's paper: "
          "45 % -> 59 % of peak on trn2 (its baselines -> its optimised kernels).")


if __name__ == "__main__":
    main(sys.argv[1:])
