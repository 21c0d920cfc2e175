"""What one candidate costs, in one-thread reference forwards (issue 14).

Usage: /usr/bin/python3.11 bench/candidate_cost.py [NKIBENCH_DIR] [--build DIR] [--problems a,b]
           [--search N] [--throughput M] [--screen hidden|seeds] [--screen-seeds K] [--hidden-reuse R] [--no-adhoc] [--no-confirm] [--no-search] [--no-screen] [--json FILE]

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
* ``screen`` and ``confirm``: the same warm 1-worker pool measurement with the
  requests of screen-then-confirm (docs/search.md; native:profile's
  screen_seeds, screen_hidden_only): the screen runs a hidden set alone
  (``--screen hidden``, the default, as the search pipelines do) or after the
  first ``--screen-seeds`` published seeds (``--screen seeds``, default 1) and
  times the hidden run - what a candidate that is thrown away costs; its
  hidden set serves up to ``--hidden-reuse`` screens (default 8, as the
  search pipelines' ``hidden_reuse``; the untimed first call draws it, so the
  timed screens show the shared set's steady state); the confirm checks the
  remaining seeds plus a fresh hidden set, untimed - what a candidate that could enter the beam
  (or beat the incumbent) costs on top. ``search`` stays the unscreened cost
  (every seed in one call: ``accelopt-host profile`` and screen_seeds 0).

Prints one table (ratios = wall / ref) and the medians against the targets
(ad hoc: median <= 10, none above 40; search: median <= 4, none above 15; a search's
thrown-away candidate is the screen, held to the search targets too),
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


PUBLISHED_SEEDS = (0, 21, 42, 63, 84)


def search(build, kernel, reference, rel_tol, n, m, memory_limit=None, request=None):
    """accelopt-bench-worker search's JSON line (see bench/worker_bench.cc); ``memory_limit``
    ('16G') raises each worker's address-space cap, as the ad hoc retry does; ``request``
    (dict) is merged into every profile request (ACCELOPT_BENCH_REQUEST: a screen's or a
    confirm's seeds)."""
    cmd = [os.path.join(build, "bench", "accelopt-bench-worker"), "search", kernel, reference, str(n), str(m),
           str(rel_tol or 0)] + ([str(_bytes(memory_limit))] if memory_limit else [])
    env = dict(os.environ, ACCELOPT_BENCH_REQUEST=json.dumps(request)) if request else None
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
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
    parser.add_argument("--no-screen", action="store_true", help="skip the screen and confirm columns")
    parser.add_argument("--no-confirm", action="store_true", help="skip the confirm column")
    parser.add_argument("--screen-seeds", type=int, default=1, help="published seeds in a screen (1-4)")
    parser.add_argument("--screen", choices=("hidden", "seeds"), default="hidden",
                        help="hidden: the screen runs the hidden set alone, as the search pipelines do "
                             "(screen_hidden_only); seeds: the first --screen-seeds published seeds before it")
    parser.add_argument("--hidden-reuse", type=int, default=8,
                        help="screens that share one hidden set, as the search pipelines' hidden_reuse (1: none)")
    parser.add_argument("--json", default="", help="also write every measurement to this file")
    parser.add_argument("--memory-limit", default="16G", help="ad hoc retry's worker memory after out_of_memory")
    parser.add_argument("--pass-bytes", default="", help="bytes of data per worker pass (ACCELOPT_PASS_BYTES, "
                                                          "e.g. 8G for one pass); default: the host's")
    args = parser.parse_args()
    problems = [p for p in args.problems.split(",") if p]
    if not 1 <= args.screen_seeds < len(PUBLISHED_SEEDS):
        parser.error(f"--screen-seeds must be in 1..{len(PUBLISHED_SEEDS) - 1}")
    screened = 0 if args.screen == "hidden" else args.screen_seeds
    screen_request = {"seeds": list(PUBLISHED_SEEDS[:screened])}
    if args.screen == "hidden":
        screen_request["hidden_only"] = True
    if args.hidden_reuse > 1:
        screen_request["hidden_reuse"] = args.hidden_reuse
    confirm_request = {"seeds": list(PUBLISHED_SEEDS[screened:]), "timing": False}
    rows = []
    if args.pass_bytes:
        os.environ["ACCELOPT_PASS_BYTES"] = str(_bytes(args.pass_bytes))  # the host's passes (children inherit)
    print(f"{'problem':24s} {'ref s':>7s} {'adhoc s':>8s} {'ratio':>6s} {'search s':>8s} {'ratio':>6s} "
          f"{'screen':>7s} {'ratio':>6s} {'confirm':>7s} {'ratio':>6s} "
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
        if not args.no_screen:
            for key, request in (("screen", screen_request),) + (() if args.no_confirm else (("confirm", confirm_request),)):
                found = search(args.build, kernel, reference, rel_tol, args.search, 0,
                               row.get("adhoc_memory_limit"), request)
                row[key] = found
                if "search_ms" in found:
                    row[key + "_s"] = statistics.median(found["search_ms"]) / 1e3
        rows.append(row)
        ref = row["ref_s"]
        t = row.get("adhoc_timings") or {}
        where = " ".join(f"{k[:-3]}={t[k] / 1e3:.2f}" for k in ("draw_ms", "run_ms", "trace_replay_ms",
                                                                "reference_wait_ms", "judge_ms", "transfer_ms")
                         if isinstance(t.get(k), (int, float)))
        if row.get("adhoc_error"):
            where = f"ERROR {row['adhoc_error'].get('kind')}: {str(row['adhoc_error'].get('message'))[:80]}"
        for key in ("search", "screen", "confirm"):
            if isinstance(row.get(key), dict) and row[key].get("error"):
                where += f" {key.upper()} ERROR {row[key]['error'][-120:]}"
        rss, host = t.get("worker_peak_rss_mb"), t.get("host_peak_rss_mb")
        calls = t.get("worker_calls")
        mark = "*" if "adhoc_memory_limit" in row else " "
        print(f"{problem:23s}{mark} {_fmt(ref, 7, 2)} {_fmt(row.get('adhoc_s'), 8, 2)} "
              f"{_fmt(row['adhoc_s'] / ref if 'adhoc_s' in row else None, 6)} {_fmt(row.get('search_s'), 8, 2)} "
              f"{_fmt(row['search_s'] / ref if 'search_s' in row else None, 6)} "
              f"{_fmt(row.get('screen_s'), 7, 2)} {_fmt(row['screen_s'] / ref if 'screen_s' in row else None, 6)} "
              f"{_fmt(row.get('confirm_s'), 7, 2)} {_fmt(row['confirm_s'] / ref if 'confirm_s' in row else None, 6)} "
              f"{_fmt(row.get('candidates_per_hour'), 7, 0)} {_fmt(rss, 7, 0)} {_fmt(host, 7, 0)} "
              f"{calls if calls else '-':>6}  {where}", flush=True)
    for key, label, median_target, worst_target in (("adhoc_s", "ad hoc", 10, 40), ("search_s", "search, unscreened", 4, 15),
                                                    ("screen_s", "search, thrown-away (screen)", 4, 15),
                                                    ("confirm_s", "search, confirm (on top of the screen)", None, None)):
        ratios = [r[key] / r["ref_s"] for r in rows if key in r]
        if ratios and median_target is None:
            print(f"{label}: median ratio {statistics.median(ratios):.1f}, worst {max(ratios):.1f} "
                  f"over {len(ratios)} problems")
        elif ratios:
            print(f"{label}: median ratio {statistics.median(ratios):.1f} (target <= {median_target}), "
                  f"worst {max(ratios):.1f} (target <= {worst_target}) over {len(ratios)} problems")
    screened = [r for r in rows if "screen_s" in r and "search_s" in r]
    if screened:
        print("screen / unscreened (same run): " + ", ".join(
            f"{r['problem']} {r['screen_s'] / r['search_s']:.2f}" for r in screened) +
            "; screen + confirm / unscreened: " + ", ".join(
            f"{r['problem']} {(r['screen_s'] + r['confirm_s']) / r['search_s']:.2f}" for r in screened if "confirm_s" in r))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    sys.exit(main())
