"""A/B of cold `accelopt-host profile` runs between two builds (each its own source tree), alternating
new, old, new, old per problem so that both see the same disk-store state; prints each run's wall time and
where it went (s). The second pair is the like-for-like one (the first new run may pay draws the store lost).

Usage: /usr/bin/python3.11 bench/adhoc_ab.py NKIBENCH NEW_BUILD OLD_BUILD PROBLEM...
"""
import json
import os
import subprocess
import sys
import time

KEYS = ("draw_ms", "run_ms", "judge_ms", "transfer_ms", "share_ms", "trace_replay_ms")


def main():
    root, new, old, problems = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    summary = json.load(open(os.path.join(root, "summary.json")))
    for problem in problems:
        name = next(k for k in summary if k.startswith(problem))
        impl = next(iter(summary[name]["cases"].values()))["impls"][0]
        kernel, reference = os.path.join(root, impl["kernel"]), os.path.join(root, impl["task"])
        for tag, build in (("new", new), ("old", old), ("new", new), ("old", old)):
            cmd = [os.path.join(build, "accelopt-host"), "profile", kernel, "--reference", reference, "--json"]
            if problem.startswith("mamba"):
                cmd += ["--rel-tol", "3e-5"]  # bench/search_quality.py's tolerance for mamba
            start = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.perf_counter() - start
            try:
                result = json.loads(done.stdout[done.stdout.index("{"):])
            except ValueError:
                result = {"error": done.stderr[-300:]}
            timings = result.get("timings", {})
            spent = {k[:-3]: round(timings.get(k, 0) / 1e3, 2) for k in KEYS}
            print(problem, tag, round(wall, 2), result.get("correct"), spent, flush=True)


if __name__ == "__main__":
    main()
