"""Compares the cost model's engine busy times with the engine active times AccelOpt measured.

Usage: /usr/bin/python3.11 bench/engine_time.py PUBLISHED_NKIBENCH_DIR [kernel ...]
           [--cache DIR] [--set knob=value ...] [--accelopt DIR]

The profiler of AccelOpt's published run reports, per NKIBench baseline, the
share of the latency each engine was active (``scalar_engine_active_time_percent``,
``vector_engine_active_time_percent``, ``gpsimd_engine_active_time_percent``
in experiments/full_complete_local/profile_results.csv, nki-facts §5.1). That
is the hardware's own figure for how long an engine's instructions took,
independent of how the kernel was scheduled, so it checks the per-instruction
cycle formulas (nki_emu/cost/formulas.py) apart from the scheduler. The CSV is
read at run time from AccelOpt's repository (``--accelopt``: a work tree or a
bare git directory; default $ACCELOPT_REPO), never copied here.

Prints per kernel and engine (ScalarE, VectorE): measured and estimated active
ms, the error, and the estimated instruction mix (instructions, mean elements
per partition N, and the cycles per element the measurement implies when the
engine runs one kind of instruction); then median and worst |error| per engine
over the kernels where the engine was active for at least 0.1 ms. Kernels are
traced as bench/calibrate.py traces them (``--cache`` shares its pickles).
"""
import collections
import csv
import io
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calibrate  # noqa: E402

CSV_PATH = "experiments/full_complete_local/profile_results.csv"
# engine -> (CSV column, clock key of nki_emu.cost.targets.Target.clock_ghz)
ENGINES = {"scalar": "scalar_engine_active_time_percent", "vector": "vector_engine_active_time_percent"}
MIN_ACTIVE_MS = 0.1


def measured_active(repo):
    """{problem: (latency ms, {engine: active ms})} from AccelOpt's published profile CSV."""
    path = os.path.join(repo, CSV_PATH)
    if os.path.isfile(path):
        text = open(path).read()
    else:
        text = subprocess.run(["git", "-C", repo, "show", f"HEAD:{CSV_PATH}"], check=True,
                              capture_output=True, text=True).stdout
    out = {}
    for row in csv.DictReader(io.StringIO(text)):
        prof = json.loads(row["profile"])
        ms = prof["latency"]
        out[row["problem"]] = (ms, {eng: prof[col] * ms for eng, col in ENGINES.items()})
    return out


def instruction_mix(records, target):
    """{engine: {op label: [instructions, total N]}} of a trace's compute records
    (engine=unknown counted on Target.auto_engine; a tensor_tensor with a PSUM operand
    labelled tensor_tensor(psum))."""
    mix = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0]))
    for rec in records:
        if rec[0] != "C":
            continue
        engine = target.auto_engine if rec[1] == "auto" else rec[1]
        label = rec[2] + ("(psum)" if rec[4].get("in_psum") else "")
        entry = mix[engine][label]
        entry[0] += 1
        entry[1] += max(int(rec[3]), 1)
    return mix


def main(argv):
    opts = calibrate._parse(argv)
    root, wanted = opts["kernels"][0], opts["kernels"][1:]
    target = calibrate._target(opts["set"])
    calibrate.nki_emu.install()
    measured = measured_active(opts["accelopt"])
    summary = json.load(open(os.path.join(root, "summary.json")))
    errors = collections.defaultdict(list)
    for name, entry in summary.items():
        if wanted and name not in wanted:
            continue
        records, counters = calibrate.trace_kernel(root, name, entry, opts["cache"], False)
        busy = calibrate.tracer.replay(records, counters, target)["engine_busy_ms"]
        mix = instruction_mix(records, target)
        ms, active = measured[name]
        print(f"{name}  (latency {ms:.3f} ms)")
        for engine in ENGINES:
            meas, est = active[engine], busy[engine]
            ops = mix.get(engine, {})
            text = ", ".join(f"{op} {n} x N {total / n:.0f}" for op, (n, total) in sorted(ops.items()))
            line = f"  {engine:7s} measured {meas:7.3f} ms  estimated {est:7.3f} ms"
            if meas >= MIN_ACTIVE_MS:
                err = (est - meas) / meas * 100
                errors[engine].append(abs(err))
                line += f"  error {err:+6.1f} %"
            if len(ops) == 1:
                (n, total), = ops.values()
                line += f"  implied {meas * 1e6 * target.clock_ghz[engine] / total:.2f} cycles/element"
            print(f"{line}  [{text}]")
    for engine, errs in errors.items():
        print(f"{engine}: median |error| {np.median(errs):.1f} %  worst {np.max(errs):.1f} %  "
              f"({len(errs)} kernels active >= {MIN_ACTIVE_MS} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
