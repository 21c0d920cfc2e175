"""The one rule for FIB names that become path components (docs/flashinfer.md, "Names").

A definition's ``name`` and ``op_type``, a solution's ``name``, ``definition``
and ``author`` end up as folder and file names (``traces/<author>/<op_type>/
<definition>.jsonl``). FIB's validate only accepts a set whose fields equal
their path components; here every such name must be a plain identifier
before it is joined to a path: 1 to 128 ASCII letters, digits, ``_``, ``-``,
``.`` or ``+``, starting with a letter, a digit or ``_``, without ``..``.
So no separator, NUL, control character, absolute path, ``.``/``..``,
hidden file or option-like name can reach the file system. The C++ twin is
``accelopt::fib::NameProblem`` (flashinfer/model.h); tests hold both to the
same cases.
"""
import re

MAX_LENGTH = 128
_ALLOWED = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+\-]*\Z")


def problem(name):
    """Why ``name`` may not be a path component, or None when it may."""
    if not isinstance(name, str):
        return f"must be a string, got {type(name).__name__}"
    if not name:
        return "must not be empty"
    if len(name) > MAX_LENGTH:
        return f"must be at most {MAX_LENGTH} characters, got {len(name)}"
    if ".." in name:
        return f"must not contain '..', got {name!r}"
    if not _ALLOWED.match(name):
        return (f"must be a plain name (ASCII letters, digits, '_', '-', '.', '+'; not starting with "
                f"'.', '-' or '+'), got {name!r}")
    return None


def component(name, field):
    """``name`` when it may be a path component; else ValueError naming ``field``."""
    why = problem(name)
    if why is not None:
        raise ValueError(f"{field}: {why}")
    return name
