"""Test support for the C++ tests: changes the embedded interpreter's os.environ.

CPython copies the process environment at start-up; a C++ test that wants
host-side Python (e.g. the neuron-profile lookup) to see a changed variable
calls :func:`set_env` through the interpreter.
"""
import os


def set_env(changes):
    """``changes``: {name: value or None (unset)}. Returns the previous values in the same form."""
    previous = {}
    for name, value in changes.items():
        previous[name] = os.environ.get(name)
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    return previous
