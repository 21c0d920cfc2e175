"""Discovers and runs the Python tests under tests/python/.

A test is a module-level function named ``test_*`` in a file named
``test_*.py``; it passes when it returns without raising. The Catch2 binary
(tests/main.cc) registers one Catch2 test case per function through
``discover()`` and runs it with ``run_one()`` inside its embedded interpreter.
Standalone use (for quick iteration)::

    /usr/bin/python3.11 tests/python/runner.py [path-substring ...]
"""
import importlib.util
import os
import sys
import time
import traceback

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(os.path.dirname(TESTS_DIR))
PYTHON_DIR = os.path.join(REPO_DIR, "host", "python")

_modules = {}


def _ensure_path():
    for path in (PYTHON_DIR, TESTS_DIR):
        if path not in sys.path:
            sys.path.insert(0, path)


def _load(path):
    if path not in _modules:
        _ensure_path()
        name = "pytest_" + os.path.relpath(path, TESTS_DIR).replace(os.sep, "_")[:-3]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _modules[path] = module
    return _modules[path]


def discover():
    """Returns [(relative_file, function_name)] for every test, sorted."""
    found = []
    for root, _dirs, files in os.walk(TESTS_DIR):
        for name in sorted(files):
            if name.startswith("test_") and name.endswith(".py"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, TESTS_DIR)
                with open(path, encoding="utf-8") as handle:
                    for line in handle:
                        if line.startswith("def test_"):
                            found.append((rel, line[4:line.index("(")]))
    return sorted(found)


def run_one(rel_file, function_name):
    """Runs one test; raises whatever the test raises."""
    module = _load(os.path.join(TESTS_DIR, rel_file))
    getattr(module, function_name)()


def main(argv):
    failures = 0
    tests = [t for t in discover() if not argv or any(a in t[0] + "::" + t[1] for a in argv)]
    for rel, fn in tests:
        start = time.perf_counter()
        try:
            run_one(rel, fn)
            status = "ok"
        except Exception:  # noqa: BLE001 - report every failure and go on
            failures += 1
            status = "FAIL\n" + traceback.format_exc()
        print(f"{rel}::{fn} ({time.perf_counter() - start:.2f}s) {status}")
    print(f"{len(tests) - failures}/{len(tests)} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
