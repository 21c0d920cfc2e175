"""Worker self-check: NumPy, builtins and the backend modules are what they were.

:func:`snapshot` records, for every watched module, the identity of each
callable, class and submodule it holds (and of each Python function's code
object); :func:`compare` lists what a candidate changed: replaced or deleted
functions (``numpy.allclose = ...``, ``f.__code__ = ...``) and new non-module
attributes (state stashed for later calls, ``numpy._cache = {}``). A worker
with a non-empty difference restarts itself after answering
(docs/isolation.md, rule R5).
"""
import sys
import types

# Module name prefixes whose namespaces are watched.
WATCHED_PREFIXES = ("numpy", "builtins", "nki_emu", "neuronxcc", "nki", "accelopt", "json", "math",
                    "base64", "hashlib", "io")


def _watched(name):
    return any(name == p or name.startswith(p + ".") for p in WATCHED_PREFIXES) \
        and not name.startswith("accelopt_candidate_")


def _fingerprint(value):
    if isinstance(value, types.FunctionType):
        return (id(value), id(value.__code__), id(value.__defaults__))
    if isinstance(value, (types.ModuleType, type, types.BuiltinFunctionType)) or callable(value):
        return (id(value),)
    return None  # plain data (counters, caches of the library itself) is not tracked


def snapshot():
    """Returns {module name: (id(module), {attr: fingerprint})} for the watched modules."""
    snap = {}
    for name, module in list(sys.modules.items()):
        if module is None or not _watched(name):
            continue
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        attrs = {}
        for attr, value in items:
            fp = _fingerprint(value)
            attrs[attr] = fp if fp is not None else ("data", type(value).__name__)
        snap[name] = (id(module), attrs)
    return snap


def compare(before, after=None):
    """Returns a list of human-readable changes from ``before`` to ``after`` (default: now)."""
    after = snapshot() if after is None else after
    changes = []
    for name, (module_id, attrs) in before.items():
        if name not in after:
            changes.append(f"module {name} was removed from sys.modules")
            continue
        new_id, new_attrs = after[name]
        if new_id != module_id:
            changes.append(f"module {name} was replaced in sys.modules")
            continue
        for attr, fp in attrs.items():
            if attr not in new_attrs:
                changes.append(f"{name}.{attr} was deleted")
            elif fp[0] != "data" and new_attrs[attr] != fp:
                changes.append(f"{name}.{attr} was replaced or patched")
        for attr, fp in new_attrs.items():
            if attr not in attrs and not (name == "builtins" and attr == "_"):
                module = sys.modules.get(name)
                if not isinstance(getattr(module, attr, None), types.ModuleType):
                    changes.append(f"{name}.{attr} was added")
        if len(changes) > 20:
            break
    return changes
