"""What one candidate costs, in one-thread reference forwards (issue 14).

Usage: /usr/bin/python3.11 bench/candidate_cost.py [NKIBENCH_DIR] [--build DIR] [--problems a,b]
           [--search N] [--throughput M] [--no-adhoc] [--no-search] [--json FILE]

``NKIBENCH_DIR`` (default: the repository's nkibench/) is an NKIBench tree
(summary.json); every problem's full-size case (the first case that is not
"small") is measured with its first kernel, as follows:

* ``ref``: the NumPy reference's ``forward`` on the seed-0 inputs, in a child
  process with one BLAS thread (OPENBLAS_NUM_THREADS=1, as every pool worker
  runs), the median of 3 runs (the first is cold); the unit of every ratio.
* ``ad hoc``: ``accelopt-host profile KERNEL --reference REF --json`` from
  the build, cold (a fresh host and worker; defaults: worker isolation,
  5 seeds + 1 hidden set), wall time; its ``timings`` show where the time went.
  A problem whose worker needs more than the default 4 GiB address space (six
  outputs of 1 GiB: bmm, bmm_softmax; lora) fails with out_of_memory (or the
  worker's std::bad_alloc) and runs again with ``--memory-limit`` (default
  16G), marked "*"; its search runs with the same limit.
* ``search``: ``accelopt-bench-worker search`` (bench/worker_bench.cc): the
  same candidate through a warm 1-worker pool after one untimed call (cached
  published draws, worker started), ``--search`` calls one after another (the
  median is reported), then ``2 x --throughput`` calls at once on a warm
  2-worker pool: candidates per hour on this machine.

Prints one table (ratios = wall / ref) and the medians against the targets
(ad hoc: median <= 10, none above 40; search: median <= 4, none above 15),
plus the peak resident memory per candidate (MB, from the result's timings:
``rss`` the largest candidate process of the worker, ``host`` the host
process itself) and the number of worker passes (accelopt/sandbox/passes.py;
``--pass-bytes`` sets their budget). The machine's other load distorts everything: run it alone, and
repeat. The latest output is docs/benchmarks/candidate-cost.txt.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ONE_THREAD = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
PYTHON = "/usr/bin/python3.11"

_REF_CHILD = """
import importlib.util, json, sys, time
import numpy as np
spec = importlib.util.spec_from_file_location("ref", sys.argv[1])
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
np.random.seed(0)
inputs = ref.get_inputs()
times = []
with np.errstate(all="ignore"):
    for _ in range(3):
        start = time.perf_counter()
        ref.forward(*inputs)
        times.append(time.perf_counter() - start)
print(json.dumps({"ref_s": sorted(times)[1], "cold_s": times[0]}))
"""


def cases(root, problems):
    """[(problem, kernel path, reference path, rel_tol or None)] of the full-size cases."""
    summary = json.load(open(os.path.join(root, "summary.json")))
    out = []
    for problem, entry in summary.items():
        if problems and problem not in problems:
            continue
        full = [c for name, c in entry["cases"].items() if name != "small"]
        if not full:
            continue
        impl = full[0]["impls"][0]
        out.append((problem, os.path.normpath(os.path.join(root, impl["kernel"])),
                    os.path.normpath(os.path.join(root, impl["task"])), entry.get("rel_tol")))
    return out


def reference_seconds(reference):
    """Median of 3 forward runs (s) on one BLAS thread, in a fresh process."""
    done = subprocess.run([PYTHON, "-c", _REF_CHILD, reference], env=ONE_THREAD, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["ref_s"]


def adhoc(build, kernel, reference, rel_tol, memory_limit=None):
    """(wall s, result dict) of one cold `accelopt-host profile --json`."""
    cmd = [os.path.join(build, "accelopt-host"), "profile", kernel, "--reference", reference, "--json"]
    if rel_tol:
        cmd += ["--rel-tol", str(rel_tol)]
    if memory_limit:
        cmd += ["--memory-limit", memory_limit]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    text = done.stdout
    try:
        result = json.loads(text[text.index("{"):])
    except ValueError:
        result = {"error": {"kind": "bench", "message": (done.stderr or text)[-2000:]}}
    return wall, result


def _bytes(size):
    """'16G' / '512M' / '1024' -> bytes (int)."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    size = str(size).strip().upper()
    return int(float(size[:-1]) * units[size[-1]]) if size[-1:] in units else int(size)


def search(build, kernel, reference, rel_tol, n, m, memory_limit=None):
    """accelopt-bench-worker search's JSON line (see bench/worker_bench.cc); ``memory_limit``
    ('16G') raises each worker's address-space cap, as the ad hoc retry does."""
    cmd = [os.path.join(build, "bench", "accelopt-bench-worker"), "search", kernel, reference, str(n), str(m),
           str(rel_tol or 0)] + ([str(_bytes(memory_limit))] if memory_limit else [])
    done = subprocess.run(cmd, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr or done.stdout)[-2000:]}
    return json.loads(lines[-1])


def _fmt(value, width=7, digits=1):
    return f"{value:{width}.{digits}f}" if isinstance(value, (int, float)) else " " * (width - 1) + "-"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("nkibench", nargs="?", default=os.path.join(ROOT, "nkibench"))
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--problems", default="")
    parser.add_argument("--search", type=int, default=2, help="timed calls through the warm 1-worker pool")
    parser.add_argument("--throughput", type=int, default=2, help="calls per worker on the 2-worker pool (0: skip)")
    parser.add_argument("--no-adhoc", action="store_true")
    parser.add_argument("--no-search", action="store_true")
    parser.add_argument("--json", default="", help="also write every measurement to this file")
    parser.add_argument("--memory-limit", default="16G", help="ad hoc retry's worker memory after out_of_memory")
    parser.add_argument("--pass-bytes", default="", help="bytes of data per worker pass (ACCELOPT_PASS_BYTES, "
                                                          "e.g. 8G for one pass); default: the host's")
    args = parser.parse_args()
    problems = [p for p in args.problems.split(",") if p]
    rows = []
    if args.pass_bytes:
        os.environ["ACCELOPT_PASS_BYTES"] = str(_bytes(args.pass_bytes))  # the host's passes (children inherit)
    print(f"{'problem':24s} {'ref s':>7s} {'adhoc s':>8s} {'ratio':>6s} {'search s':>8s} {'ratio':>6s} "
          f"{'cand/h':>7s} {'rss MB':>7s} {'host MB':>7s} passes  where the ad hoc time went (s)", flush=True)
    for problem, kernel, reference, rel_tol in cases(args.nkibench, problems):
        row = {"problem": problem, "ref_s": reference_seconds(reference)}
        if not args.no_adhoc:
            wall, result = adhoc(args.build, kernel, reference, rel_tol)
            error = result.get("error") or {}
            if args.memory_limit and (error.get("kind") == "out_of_memory" or "bad_alloc" in str(error.get("message"))):
                row["adhoc_default_limit"] = {"s": wall, "error": result["error"]}
                wall, result = adhoc(args.build, kernel, reference, rel_tol, args.memory_limit)
                row["adhoc_memory_limit"] = args.memory_limit
            row.update(adhoc_s=wall, adhoc_correct=result.get("correct"), adhoc_error=result.get("error"),
                       adhoc_timings=result.get("timings", {}))
        if not args.no_search:
            found = search(args.build, kernel, reference, rel_tol, args.search, args.throughput,
                           row.get("adhoc_memory_limit"))
            row["search"] = found
            if "search_ms" in found:
                row["search_s"] = statistics.median(found["search_ms"]) / 1e3
                row["candidates_per_hour"] = found.get("candidates_per_hour")
        rows.append(row)
        ref = row["ref_s"]
        t = row.get("adhoc_timings") or {}
        where = " ".join(f"{k[:-3]}={t[k] / 1e3:.2f}" for k in ("draw_ms", "run_ms", "trace_replay_ms",
                                                                "reference_wait_ms", "judge_ms", "transfer_ms")
                         if isinstance(t.get(k), (int, float)))
        if row.get("adhoc_error"):
            where = f"ERROR {row['adhoc_error'].get('kind')}: {str(row['adhoc_error'].get('message'))[:80]}"
        if isinstance(row.get("search"), dict) and row["search"].get("error"):
            where += f" SEARCH ERROR {row['search']['error'][-120:]}"
        rss, host = t.get("worker_peak_rss_mb"), t.get("host_peak_rss_mb")
        calls = t.get("worker_calls")
        mark = "*" if "adhoc_memory_limit" in row else " "
        print(f"{problem:23s}{mark} {_fmt(ref, 7, 2)} {_fmt(row.get('adhoc_s'), 8, 2)} "
              f"{_fmt(row['adhoc_s'] / ref if 'adhoc_s' in row else None, 6)} {_fmt(row.get('search_s'), 8, 2)} "
              f"{_fmt(row['search_s'] / ref if 'search_s' in row else None, 6)} "
              f"{_fmt(row.get('candidates_per_hour'), 7, 0)} {_fmt(rss, 7, 0)} {_fmt(host, 7, 0)} "
              f"{calls if calls else '-':>6}  {where}", flush=True)
    for key, label, median_target, worst_target in (("adhoc_s", "ad hoc", 10, 40), ("search_s", "search", 4, 15)):
        ratios = [r[key] / r["ref_s"] for r in rows if key in r]
        if ratios:
            print(f"{label}: median ratio {statistics.median(ratios):.1f} (target <= {median_target}), "
                  f"worst {max(ratios):.1f} (target <= {worst_target}) over {len(ratios)} problems")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    sys.exit(main())
