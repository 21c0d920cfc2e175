"""Functions tests/host/lua/python_call_test.cc calls from Lua stages.

tests/python is on the test binary's sys.path as a user folder (like a
pipeline's python_path), so accel.python_call may call what is defined here.
"""
import json
from os import system as run_shell  # noqa: F401  (re-exported: must stay uncallable from Lua)


def dumps(value, sort_keys=False):
    """json.dumps of ``value``."""
    return json.dumps(value, sort_keys=sort_keys)


def largest(*values):
    """The largest argument."""
    return max(values)


def count(items):
    """The number of items."""
    return len(items)


def parse(text):
    """json.loads of ``text`` (raises on bad JSON)."""
    return json.loads(text)
