"""Emulator speed vs the NumPy references on the full-size published NKIBench kernels.

Usage: /usr/bin/python3.11 bench/emulator_speed.py PUBLISHED_NKIBENCH_DIR [--repeat N] [--breakdown] [kernel ...]

Each problem runs in its own child process (so that peak memory is per
kernel): the NumPy reference once, then the emulator once with cost tracing
(the profiling harness's timed run) and once without it (the harness's
correctness runs, five of the six per candidate). Prints per problem the
reference and emulator wall times (s), both ratios and the child's peak
resident memory (GB, ru_maxrss), then the median ratios (target <= 3, judged
on the traced run) and the largest peak. ``--repeat N`` runs each problem in N
fresh processes (each still one cold run of each side) and reports the run with
the median traced ratio, plus the range: single cold runs of 0.1 s references
vary up to 2x. ``--breakdown`` also runs the kernel on the cost-only path
(``compute=False``: matmul and scan arithmetic skipped, everything else as in
the untraced run) and prints the arithmetic's share (untraced minus cost-only
time) as a ratio to the reference: the floor that no bookkeeping speed-up
removes. Run it alone: the machine's other load distorts all times.
"""
import importlib.util
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "host", "python"))


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def child(root, name, breakdown=False):
    """Measures one problem; prints one JSON line {t_ref, t_emu, t_plain, peak_gb[, t_nomath]}
    (s, s, s, GB[, s])."""
    import nki_emu
    nki_emu.install()
    entry = json.load(open(os.path.join(root, "summary.json")))[name]
    impl = next(iter(entry["cases"].values()))["impls"][0]
    ref = _load(os.path.join(root, impl["task"]), "ref_" + name)
    ker = _load(os.path.join(root, impl["kernel"]), "ker_" + name)
    np.random.seed(0)
    inputs = ref.get_inputs()
    t0 = time.perf_counter()
    ref.forward(*inputs)
    t_ref = time.perf_counter() - t0
    kin = ref.transform_to_nki_inputs(inputs)
    t0 = time.perf_counter()
    nki_emu.run(ker.kernel, kin)
    t_emu = time.perf_counter() - t0
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    t0 = time.perf_counter()
    nki_emu.run(ker.kernel, kin, trace=False)
    t_plain = time.perf_counter() - t0
    out = {"t_ref": t_ref, "t_emu": t_emu, "t_plain": t_plain, "peak_gb": peak_gb}
    if breakdown:
        t0 = time.perf_counter()
        nki_emu.run(ker.kernel, kin, trace=False, compute=False)
        out["t_nomath"] = time.perf_counter() - t0
    print(json.dumps(out))


def main(argv):
    if argv and argv[0] == "--child":
        child(argv[1], argv[2], "--breakdown" in argv)
        return 0
    breakdown = "--breakdown" in argv
    argv = [a for a in argv if a != "--breakdown"]
    repeat = 1
    if "--repeat" in argv:
        at = argv.index("--repeat")
        repeat = int(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    root, wanted = argv[0], argv[1:]
    summary = json.load(open(os.path.join(root, "summary.json")))
    ratios, plain_ratios, peaks = [], [], []
    for name in summary:
        if wanted and name not in wanted:
            continue
        runs = []
        for _ in range(repeat):
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", root, name]
                                  + (["--breakdown"] if breakdown else []), capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{name:24s} FAILED: {proc.stderr.strip().splitlines()[-1:]}", flush=True)
                break
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        if len(runs) < repeat:
            continue
        # per problem: the run with the median traced ratio (each run is one cold process)
        runs.sort(key=lambda r: r["t_emu"] / r["t_ref"])
        r = runs[len(runs) // 2]
        ratio = r["t_emu"] / r["t_ref"]
        plain = float(np.median([x["t_plain"] / x["t_ref"] for x in runs]))
        ratios.append(ratio)
        plain_ratios.append(plain)
        peaks.append(max(x["peak_gb"] for x in runs))
        spread = ""
        if repeat > 1:
            spread = f"  (traced ratio {runs[0]['t_emu'] / runs[0]['t_ref']:.2f}-{runs[-1]['t_emu'] / runs[-1]['t_ref']:.2f})"
        extra = ""
        if breakdown:
            math_s = max(0.0, r["t_plain"] - r["t_nomath"])
            extra = f"  arithmetic {math_s:6.2f} s = {math_s / r['t_ref']:5.2f}x reference"
        print(f"{name:24s} reference {r['t_ref']:7.2f} s  emulator traced {r['t_emu']:7.2f} s  ratio {ratio:6.2f}  "
              f"untraced {r['t_plain']:7.2f} s  ratio {plain:6.2f}  peak RSS {peaks[-1]:6.2f} GB{spread}{extra}", flush=True)
    if ratios:
        print(f"median ratio traced {np.median(ratios):.2f} (target <= 3)   untraced {np.median(plain_ratios):.2f}   "
              f"largest peak RSS {max(peaks):.2f} GB" + (f"   ({repeat} cold runs per problem)" if repeat > 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
