"""The gate of ``accel.python_call``: which Python functions a Lua stage may call (docs/lua-stages.md).

A Lua stage is sandboxed (no ``io``, ``os``, ``require``); a Python call must
not undo that. ``os.system``, ``subprocess``, ``builtins.exec`` or
``os.getenv("OPENAI_API_KEY")`` would be a shell and the API key, and even the
host's own package has functions that run a file as Python
(``accelopt.profile.profile_kernel``). So a call is allowed only to:

* a function of the host's packages (``accelopt``, ``nki_emu``) that its module
  lists in ``LUA_CALLABLE`` (pure helpers: no file, process or environment access);
* a function defined in a module of the user's own folders (the pipeline's
  ``python_path:``, ``--python-path``, ``ACCELOPT_PYTHON_PATH``): code the user
  chose to run, trusted as native plugins are. The module must be found in one of
  those folders (not the standard library of the same name), and the function
  defined there, not imported from elsewhere (``from os import system``).

Module and function names are plain identifiers; none may start with ``_``.
A refused call raises ``LuaCallRefused`` before anything is imported.
"""
import importlib
import importlib.util
import os
import re
import sys

HOST_PACKAGES = ("accelopt", "nki_emu")
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


class LuaCallRefused(PermissionError):
    """A Lua stage asked for a function it may not call (the host reports kind ``forbidden_call``)."""


def _refuse(module, function, why):
    raise LuaCallRefused(f"{module}.{function} is not callable from Lua: {why}")


def _inside(path, folders):
    """True when ``path`` lies in one of ``folders`` (both resolved through links)."""
    if not path:
        return False
    real = os.path.realpath(path)
    for folder in folders:
        root = os.path.realpath(folder)
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


def _locations(module_name):
    """The files or folders the top-level module ``module_name`` is (or would be) imported from, without
    running it: its ``__file__``/``__path__`` when imported, else what the import system finds (for a
    top-level name this runs no module code). [] for built-in and frozen modules."""
    module = sys.modules.get(module_name)
    if module is not None:
        spec = getattr(module, "__spec__", None)
    else:
        try:
            spec = importlib.util.find_spec(module_name)
        except (ImportError, ValueError):
            spec = None
    if spec is None:
        file = getattr(module, "__file__", None) if module is not None else None
        return [file] if file else []
    found = []
    if spec.origin and spec.has_location:
        found.append(spec.origin)
    found.extend(spec.submodule_search_locations or [])
    return found


def resolve(module, function, user_folders):
    """The callable ``module.function`` if a Lua stage may call it; raises LuaCallRefused otherwise.

    ``user_folders``: the user's python_path folders (absolute)."""
    if not isinstance(module, str) or not isinstance(function, str):
        _refuse(module, function, "names must be strings")
    parts = module.split(".")
    for name in parts + [function]:
        if not _IDENTIFIER.match(name):
            _refuse(module, function, f"'{name}' is not a plain identifier (no dots in the function, "
                                      "no leading underscore)")
    top = parts[0]
    if top in HOST_PACKAGES:
        target = importlib.import_module(module)
        listed = getattr(target, "LUA_CALLABLE", ())
        if function not in listed:
            _refuse(module, function, f"{module} does not list it in LUA_CALLABLE "
                                      f"({', '.join(listed) if listed else 'it lists nothing'}); only those "
                                      "functions of the host's own packages are")
        return getattr(target, function)
    locations = _locations(top)
    if not locations or not all(_inside(place, user_folders) for place in locations):
        _refuse(module, function, f"module '{top}' is neither one of the host's packages ({', '.join(HOST_PACKAGES)}) "
                                  "nor found in a python_path folder of the pipeline (python_path:, --python-path, "
                                  "ACCELOPT_PYTHON_PATH)")
    target = importlib.import_module(module)
    if not _inside(getattr(target, "__file__", None), user_folders):
        _refuse(module, function, f"{module} is not a module of a python_path folder")
    value = getattr(target, function)  # AttributeError as for any missing function
    defined_in = getattr(value, "__module__", None)
    home = sys.modules.get(defined_in) if isinstance(defined_in, str) else None
    if (not callable(value) or isinstance(value, type(sys)) or not isinstance(defined_in, str)
            or defined_in.split(".")[0] != top or home is None or not _inside(getattr(home, "__file__", None), user_folders)):
        _refuse(module, function, f"it is not a function defined in {module} (imported from {defined_in or 'elsewhere'})")
    return value


def call(module, function, args, kwargs, user_folders):
    """``module.function(*args, **kwargs)`` after ``resolve``; the host's entry point for accel.python_call."""
    return resolve(module, function, user_folders)(*args, **kwargs)
