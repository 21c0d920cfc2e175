"""Fits the cost model's free knobs to the measured trn1 latencies by coordinate descent.

Usage: /usr/bin/python3.11 bench/fit_knobs.py PUBLISHED_NKIBENCH_DIR --cache DIR
           [--set knob=value ...] [--grid knob=v1,v2,... ...] [--sweeps N] [--loo]

Replays the cached instruction records of bench/calibrate.py (run it once
with the same ``--cache`` first) on trn1 with the knobs of ``--set`` fixed,
then, for each knob of the grid in turn, keeps the value that minimises the
objective

    median |latency error| + worst |latency error| / 2 + 100 * max(0, 0.98 - Spearman)

(all in percent), repeating the sweep ``--sweeps`` times (default 2) or until
nothing changes. Knob values are physically meaningful grids, never per
kernel. Prints every evaluation and the best ``--set`` line; it never edits
targets.py (copy the values there by hand, with the calibration output).

``--loo`` evaluates the whole product of the grid once per kernel instead and
reports the leave-one-out error: for each kernel, the grid point that scores
best on the other 13, and its error on the kernel left out.
"""
import dataclasses
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calibrate  # noqa: E402 - the bench directory is on the path now

from nki_emu.cost import tracer  # noqa: E402

# knob -> candidate values (the documented grids of docs/nki-emulator.md)
DEFAULT_GRID = {
    "tensor_tensor_factor": [1.5, 1.75, 2.0],
    "reciprocal_factor": [2.0, 3.0],
    "buffers_affine": [2, 3, 4],
    "sync_ns": [0.0, 30.0, 60.0],
    "dma_fixed_ns": [0.0, 50.0, 100.0],
    "dma_desc_ns": [10.0, 15.0, 20.0],
    "act_overhead_cycles": [0, 32, 64],
}


def objective(rows):
    """(score, median, worst, spearman) of [(measured ms, estimated ms)]."""
    errs = np.array([abs(e - m) / m * 100 for m, e in rows])
    rho = calibrate.spearman([m for m, _ in rows], [e for _, e in rows])
    median, worst = float(np.median(errs)), float(errs.max())
    return median + worst / 2 + 100 * max(0.0, 0.98 - rho), median, worst, rho


def evaluate(traces, target):
    rows = []
    for name, (records, counters) in traces.items():
        rows.append((calibrate.MEASURED[name][0], tracer.replay(records, counters, target)["latency_ms"]))
    return objective(rows)


def _value(text):
    try:
        return float(text)
    except ValueError:
        return text  # a string knob (auto_engine, compute_order)


def _parse(argv):
    opts = {"cache": None, "set": {}, "grid": {}, "sweeps": 2, "root": None, "loo": False}
    it = iter(argv)
    for a in it:
        if a == "--cache":
            opts["cache"] = next(it)
        elif a == "--set":
            key, _, value = next(it).partition("=")
            opts["set"][key] = value
        elif a == "--grid":
            key, _, values = next(it).partition("=")
            opts["grid"][key] = [_value(v) for v in values.split(",")]
        elif a == "--sweeps":
            opts["sweeps"] = int(next(it))
        elif a == "--loo":
            opts["loo"] = True
        else:
            opts["root"] = a
    if not opts["root"] or not opts["cache"]:
        raise SystemExit(__doc__)
    return opts


def leave_one_out(traces, base, grid):
    """Evaluates every combination of the grid once per kernel, then for each kernel picks
    the combination that scores best on the other 13 and reports its error on the one left
    out (the out-of-sample error of fitting these knobs). Returns 0."""
    import itertools
    names = list(traces)
    combos = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    table = []  # per combination: {name: estimated ms}
    for i, combo in enumerate(combos):
        target = dataclasses.replace(base, **{k: (type(getattr(base, k))(v) if not isinstance(v, str) else v)
                                              for k, v in combo.items()})
        table.append({n: tracer.replay(*traces[n], target)["latency_ms"] for n in names})
        print(f"combination {i + 1}/{len(combos)} {combo}: score {objective([(calibrate.MEASURED[n][0], table[-1][n]) for n in names])[0]:.2f}",
              flush=True)
    scores = [objective([(calibrate.MEASURED[n][0], est[n]) for n in names]) for est in table]
    best = min(range(len(combos)), key=lambda j: scores[j][0])
    print(f"in-sample best {combos[best]}: median {scores[best][1]:.1f} %, worst {scores[best][2]:.1f} %, "
          f"Spearman {scores[best][3]:.3f}")
    errs = []
    for out in names:
        rest = [n for n in names if n != out]
        j = min(range(len(combos)),
                key=lambda j: objective([(calibrate.MEASURED[n][0], table[j][n]) for n in rest])[0])
        ms = calibrate.MEASURED[out][0]
        err = (table[j][out] - ms) / ms * 100
        errs.append(abs(err))
        print(f"leave out {out:24s} fitted on 13: {combos[j]}  estimate {table[j][out]:8.3f} ms vs "
              f"{ms:7.3f} ({err:+6.1f} %; in-sample {(table[best][out] - ms) / ms * 100:+6.1f} %)")
    print(f"leave-one-out median |error| {np.median(errs):.1f} %, worst {max(errs):.1f} %")
    return 0


def main(argv):
    opts = _parse(argv)
    grid = opts["grid"] or DEFAULT_GRID
    base = calibrate._target(opts["set"])
    summary = json.load(open(os.path.join(opts["root"], "summary.json")))
    traces = {name: calibrate.trace_kernel(opts["root"], name, entry, opts["cache"], False)
              for name, entry in summary.items() if name in calibrate.MEASURED}
    if opts["loo"]:
        return leave_one_out(traces, base, grid)
    current = {k: getattr(base, k) for k in grid}
    best = evaluate(traces, base)
    print(f"start {current}: score {best[0]:.2f} (median {best[1]:.1f} %, worst {best[2]:.1f} %, "
          f"Spearman {best[3]:.3f})", flush=True)
    for sweep in range(opts["sweeps"]):
        changed = False
        for knob, values in grid.items():
            for value in values:
                kind = type(getattr(base, knob))
                value = kind(value) if not isinstance(value, str) else value
                if value == current[knob]:
                    continue
                trial = dict(current, **{knob: value})
                score = evaluate(traces, dataclasses.replace(base, **trial))
                print(f"sweep {sweep + 1} {knob}={value}: score {score[0]:.2f} (median {score[1]:.1f} %, "
                      f"worst {score[2]:.1f} %, Spearman {score[3]:.3f})", flush=True)
                if score[0] < best[0] - 1e-9:
                    best, current, changed = score, trial, True
        if not changed:
            break
    fixed = " ".join(f"--set {k}={v}" for k, v in opts["set"].items())
    print(f"best: score {best[0]:.2f} (median {best[1]:.1f} %, worst {best[2]:.1f} %, Spearman {best[3]:.3f})")
    print("knobs: " + " ".join(f"--set {k}={v}" for k, v in current.items()) + (" " + fixed if fixed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
