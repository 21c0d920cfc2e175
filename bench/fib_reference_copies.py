"""Reference copies of a FlashInfer-Bench trace set's random-input definitions (issue 38).

Usage: /usr/bin/python3.11 bench/fib_reference_copies.py TRACE_SET_DIR [--host build/accelopt-host]
           [--venv .venv | --no-venv] [--workloads N] [--out DIR] [--only NAME,...]

For every definition of the set whose workloads all have random inputs only (the
ones a CPU machine can run without the set's safetensors blobs), this writes a
python solution whose ``run`` IS the definition's own reference (author
``reference_copy``, non-DPS, entry ``main.py::run``) into a copy of the set,
then runs ``pipelines/flashinfer-profile.yaml`` on that copy for those
solutions with the host (``ACCELOPT_VENV`` set to the PyPI environment unless
``--no-venv``). A reference copy must pass: anything but PASSED on a workload is
a defect of the host's evaluation (input drawing, dtypes, output checks) or a
gap of the CPU torch (Debian's 1.13 has no fp16 matmul and no float8).

The public dataset is ``flashinfer-ai/flashinfer-trace`` (before it moved to
Hugging Face it lived in the flashinfer-bench repository under
``flashinfer_trace/``: ``git archive 6569a4d6^ flashinfer_trace``). Timing is
cut to one trial of one warm-up and three timed calls: this checks status, not
speed. Prints one line per definition (status counts over its first N
workloads) and exits 1 if any reference copy did not pass on every workload.
"""
import argparse
import collections
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUTHOR = "reference_copy"


def random_only_definitions(trace_set):
    """{definition name: (definition path, op_type)} for definitions whose every workload is random-only."""
    found = {}
    for path in sorted(glob.glob(os.path.join(trace_set, "workloads", "**", "*.jsonl"), recursive=True)):
        with open(path, encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
        if not rows:
            continue
        if not all(all(value.get("type") == "random" for value in row["workload"]["inputs"].values()) for row in rows):
            continue
        name = rows[0]["definition"]
        definitions = glob.glob(os.path.join(trace_set, "definitions", "**", name + ".json"), recursive=True)
        if definitions:
            with open(definitions[0], encoding="utf-8") as handle:
                found[name] = (definitions[0], json.load(handle)["op_type"])
    return found


def write_reference_copy(copy_dir, name, definition_path, op_type):
    with open(definition_path, encoding="utf-8") as handle:
        definition = json.load(handle)
    solution = {
        "name": name + "_reference_copy",
        "definition": name,
        "author": AUTHOR,
        "description": "The definition's own reference, as a python solution (bench/fib_reference_copies.py).",
        "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run",
                 "dependencies": ["torch"], "destination_passing_style": False},
        "sources": [{"path": "main.py", "content": definition["reference"]}],
    }
    folder = os.path.join(copy_dir, "solutions", AUTHOR, op_type, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, solution["name"] + ".json"), "w", encoding="utf-8") as handle:
        json.dump(solution, handle, indent=2)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace_set")
    parser.add_argument("--host", default=os.path.join(REPO, "build", "accelopt-host"))
    parser.add_argument("--venv", default=os.path.join(REPO, ".venv"))
    parser.add_argument("--no-venv", action="store_true", help="use the system torch (Debian's 1.13)")
    parser.add_argument("--workloads", type=int, default=2, help="workloads per definition (the first N)")
    parser.add_argument("--only", default="", help="comma-separated definition names")
    parser.add_argument("--out", default="", help="run directory (default: a temporary one)")
    args = parser.parse_args(argv)
    if not os.path.isdir(os.path.join(args.trace_set, "definitions")):
        print(f"{args.trace_set}: not a FlashInfer-Bench trace set (no definitions/)", file=sys.stderr)
        return 2
    found = random_only_definitions(args.trace_set)
    if args.only:
        wanted = set(args.only.split(","))
        found = {name: value for name, value in found.items() if name in wanted}
    if not found:
        print("no random-input definition selected", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="fib-refcopy-")
    copy_dir = os.path.join(work, "set")
    shutil.copytree(args.trace_set, copy_dir, ignore=shutil.ignore_patterns("solutions", "traces"))
    for name, (path, op_type) in found.items():
        write_reference_copy(copy_dir, name, path, op_type)
    run_dir = args.out or os.path.join(work, "run")
    env = dict(os.environ, ACCELOPT_NO_PROGRESS="1")
    if not args.no_venv:
        env["ACCELOPT_VENV"] = os.path.abspath(args.venv)
    command = [args.host, "run", os.path.join(REPO, "pipelines", "flashinfer-profile.yaml"), "--run-dir", run_dir,
               "--set", "vars.trace_set=" + copy_dir, "--set", "vars.authors=[" + AUTHOR + "]",
               "--set", "vars.definitions=[" + ",".join(sorted(found)) + "]",
               "--set", f"vars.max_workloads={args.workloads}", "--set", "vars.trials=1",
               "--set", "vars.warmup=1", "--set", "vars.iterations=3"]
    completed = subprocess.run(command, env=env, capture_output=True, encoding="utf-8", errors="replace")
    statuses = collections.defaultdict(collections.Counter)
    errors = {}
    for path in glob.glob(os.path.join(run_dir, "traces", "**", "*.jsonl"), recursive=True):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                trace = json.loads(line)
                if trace.get("solution") is None:
                    continue
                evaluation = trace["evaluation"]
                statuses[trace["definition"]][evaluation["status"]] += 1
                if evaluation["status"] != "PASSED":
                    errors.setdefault(trace["definition"], evaluation.get("log", "")[-300:])
                torch_version = evaluation.get("environment", {}).get("libs", {}).get("torch", "?")
    failed = 0
    for name in sorted(found):
        counts = statuses.get(name, collections.Counter())
        ok = counts and set(counts) == {"PASSED"} and sum(counts.values()) == args.workloads
        failed += not ok
        text = ", ".join(f"{status} {count}" for status, count in sorted(counts.items())) or "no trace"
        print(f"{'ok  ' if ok else 'FAIL'} {name:32s} {text}")
        if not ok and name in errors:
            print("     " + errors[name].replace("\n", "\n     "))
    print(f"{len(found) - failed}/{len(found)} reference copies passed on their first {args.workloads} workload(s); "
          f"torch {torch_version if statuses else '?'}; host exit {completed.returncode}; run {run_dir}")
    if completed.returncode != 0:
        print(completed.stdout[-2000:] + completed.stderr[-2000:], file=sys.stderr)
    return 1 if failed or completed.returncode != 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
