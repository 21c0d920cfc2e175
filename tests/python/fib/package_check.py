"""Loads a trace-set directory with flashinfer_bench's own TraceSet and prints what it holds.

Run by test_fib_package.py under the PyPI environment's interpreter (.venv/bin/python),
which has the package; prints one JSON object: {"ok": true, "definitions": [...],
"solutions": N, "traces": N} or {"ok": false, "error": "..."} when the package refuses it,
one line per directory given (one interpreter start: importing the package takes seconds).
"""
import json
import sys


def main(paths):
    for path in paths:
        print(json.dumps(load(path)), flush=True)
    return 0


def load(path):
    from flashinfer_bench import TraceSet

    try:
        trace_set = TraceSet.from_path(path)
    except Exception as error:  # noqa: BLE001 - any refusal of the package's models
        return {"ok": False, "error": f"{type(error).__name__}: {error}"}
    solutions = sum(len(items) for items in trace_set.solutions.values())
    traces = sum(len(items) for items in trace_set.traces.values())
    return {"ok": True, "definitions": sorted(trace_set.definitions), "solutions": solutions, "traces": traces}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
