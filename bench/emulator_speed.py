"""Emulator speed vs the NumPy references on the full-size published NKIBench kernels.

Usage: /usr/bin/python3.11 bench/emulator_speed.py PUBLISHED_NKIBENCH_DIR [--repeat N] [--breakdown] [kernel ...]

Each problem runs in its own child processes (so that peak memory is per
kernel and every run is cold): one runs the NumPy reference on all BLAS
threads, then the emulator once with cost tracing (the profiling harness's
timed run) and once without it (the harness's correctness runs, five of the
six per candidate); another runs the reference alone on one BLAS thread.

The target (median ratio <= 3) is judged on the traced run against the
one-thread reference: that is how a search runs both sides, since every worker
of the pool is started with OPENBLAS_NUM_THREADS=1 (one worker per core,
host/src/worker/worker_process.cc) and the emulator's own matmuls are single
tiles that run single-threaded anyway (nki_emu/blas_threads.py). The ratio
against the all-thread reference is printed next to it.

Prints per problem both reference times, the emulator times (s), the ratios
and the child's peak resident memory (GB, ru_maxrss), then the medians.
``--repeat N`` runs each problem N times (fresh processes) and reports the run
with the median traced ratio, plus the range: single cold runs of 0.1 s
references vary up to 2x. ``--breakdown`` also runs the kernel on the
cost-only path (``compute=False``: matmul and scan arithmetic skipped,
everything else as in the untraced run) and prints the arithmetic's share
(untraced minus cost-only time) as a ratio to the one-thread reference: the
floor that no bookkeeping speed-up removes. Run it alone: the machine's other
load distorts all times.
"""
import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

# What a worker of the pool sets for the kernels and references it runs (host/src/worker/worker_process.cc).
ONE_THREAD = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "host", "python"))


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def child(root, name, breakdown=False, reference_only=False):
    """Measures one problem; prints one JSON line.

    Default: {t_ref, t_emu, t_plain, peak_gb[, t_nomath]} (s, s, s, GB[, s]) with
    the reference on all BLAS threads. ``reference_only``: {t_ref} (s) for the
    reference alone (the parent starts this child with one BLAS thread).
    """
    import nki_emu
    nki_emu.install()
    entry = json.load(open(os.path.join(root, "summary.json")))[name]
    impl = next(iter(entry["cases"].values()))["impls"][0]
    ref = _load(os.path.join(root, impl["task"]), "ref_" + name)
    np.random.seed(0)
    inputs = ref.get_inputs()
    if reference_only:
        t0 = time.perf_counter()
        ref.forward(*inputs)
        print(json.dumps({"t_ref": time.perf_counter() - t0}))
        return
    ker = _load(os.path.join(root, impl["kernel"]), "ker_" + name)
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


def _run_child(root, name, *flags, env=None):
    """One cold child process; returns its JSON line as a dict, or None (prints why) on failure."""
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", root, name, *flags],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print(f"{name:24s} FAILED: {proc.stderr.strip().splitlines()[-1:]}", flush=True)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(root, name, repeat, breakdown):
    """``repeat`` cold runs of each side; returns a dict of per-problem figures or None on failure."""
    runs = []
    for _ in range(repeat):
        run = _run_child(root, name, *(["--breakdown"] if breakdown else []))
        single = _run_child(root, name, "--reference-only", env=ONE_THREAD)
        if run is None or single is None:
            return None
        run["t_ref1"] = single["t_ref"]
        runs.append(run)
    # the run with the median traced ratio against the one-thread reference (each run is one cold process)
    runs.sort(key=lambda r: r["t_emu"] / r["t_ref1"])
    r = dict(runs[len(runs) // 2])
    r["ratio1"] = r["t_emu"] / r["t_ref1"]
    r["ratio"] = float(np.median([x["t_emu"] / x["t_ref"] for x in runs]))
    r["plain1"] = float(np.median([x["t_plain"] / x["t_ref1"] for x in runs]))
    r["spread"] = (runs[0]["t_emu"] / runs[0]["t_ref1"], runs[-1]["t_emu"] / runs[-1]["t_ref1"])
    r["peak_gb"] = max(x["peak_gb"] for x in runs)
    return r


def main(argv):
    if argv and argv[0] == "--child":
        child(argv[1], argv[2], "--breakdown" in argv, "--reference-only" in argv)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="published NKIBench directory (holds summary.json)")
    parser.add_argument("kernels", nargs="*", help="problems to run (default: all in summary.json)")
    parser.add_argument("--repeat", type=int, default=1, help="cold runs per problem (default 1)")
    parser.add_argument("--breakdown", action="store_true", help="also report the arithmetic's share")
    args = parser.parse_args(argv)
    summary = json.load(open(os.path.join(args.root, "summary.json")))
    threads = os.cpu_count()
    print(f"{'problem':22s} {'ref 1 thr':>9s} {'ref ' + str(threads) + ' thr':>9s} {'traced':>8s} "
          f"{'ratio 1thr':>10s} {'ratio ' + str(threads) + 'thr':>10s} {'untraced':>8s} {'ratio 1thr':>10s} "
          f"{'peak RSS':>8s}", flush=True)
    rows = []
    for name in summary:
        if args.kernels and name not in args.kernels:
            continue
        r = measure(args.root, name, args.repeat, args.breakdown)
        if r is None:
            continue
        rows.append(r)
        extra = ""
        if args.repeat > 1:
            extra += f"  (traced ratio 1thr {r['spread'][0]:.2f}-{r['spread'][1]:.2f})"
        if args.breakdown:
            math_s = max(0.0, r["t_plain"] - r["t_nomath"])
            extra += f"  arithmetic {math_s:5.2f} s = {math_s / r['t_ref1']:4.2f}x ref 1thr"
        print(f"{name:22s} {r['t_ref1']:8.2f}s {r['t_ref']:8.2f}s {r['t_emu']:7.2f}s {r['ratio1']:10.2f} "
              f"{r['ratio']:10.2f} {r['t_plain']:7.2f}s {r['plain1']:10.2f} {r['peak_gb']:6.2f}GB{extra}", flush=True)
    if rows:
        med = lambda key: float(np.median([r[key] for r in rows]))  # noqa: E731
        print(f"median traced ratio: {med('ratio1'):.2f} against the 1-thread reference (the worker pool's "
              f"configuration; target <= 3), {med('ratio'):.2f} against the {threads}-thread reference; "
              f"untraced {med('plain1'):.2f}; largest peak RSS {max(r['peak_gb'] for r in rows):.2f} GB"
              + (f" ({args.repeat} cold runs per problem)" if args.repeat > 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
