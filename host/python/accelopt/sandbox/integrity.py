"""Worker self-check: NumPy, builtins and the backend modules are what they were.

:func:`snapshot` records, for every watched module, the identity of each
callable, class and submodule it holds (and of each Python function's code
object); :func:`compare` lists what a candidate changed: replaced or deleted
functions (``numpy.allclose = ...``, ``f.__code__ = ...``) and new non-module
attributes (state stashed for later calls, ``numpy._cache = {}``). A worker
with a non-empty difference restarts itself after answering
(docs/isolation.md, rule R5).
"""
import operator
import sys
import types

# Module name prefixes whose namespaces are watched.
WATCHED_PREFIXES = ("numpy", "builtins", "nki_emu", "neuronxcc", "nki", "accelopt", "json", "math",
                    "base64", "hashlib", "io")


def _watched(name):
    return any(name == p or name.startswith(p + ".") for p in WATCHED_PREFIXES) \
        and not name.startswith("accelopt_candidate_")


def _tracked(value):
    return isinstance(value, (types.ModuleType, type)) or callable(value)


_code_of = operator.attrgetter("__code__")
_defaults_of = operator.attrgetter("__defaults__")


class _Module:
    """One watched module as recorded: namespace copy, its keys and values in
    order, and the code objects and defaults of its Python functions."""

    __slots__ = ("module", "namespace", "code", "keys", "values", "functions", "codes", "defaults")

    def __init__(self, module, namespace):
        self.module, self.namespace = module, namespace
        self.keys, self.values = list(namespace.keys()), list(namespace.values())
        self.functions = [v for v in self.values if isinstance(v, types.FunctionType)]
        self.codes = list(map(_code_of, self.functions))
        self.defaults = list(map(_defaults_of, self.functions))
        self.code = {attr: (value.__code__, value.__defaults__) for attr, value in namespace.items()
                     if isinstance(value, types.FunctionType)}

    def unchanged(self, current):
        """Fast path: same keys, values, code objects and defaults, all by identity (C loops).

        Identity, never ``==``: an object with a lying ``__eq__`` cannot pass.
        """
        return (len(current) == len(self.keys)
                and all(map(operator.is_, current.keys(), self.keys))
                and all(map(operator.is_, current.values(), self.values))
                and all(map(operator.is_, map(_code_of, self.functions), self.codes))
                and all(map(operator.is_, map(_defaults_of, self.functions), self.defaults)))


def snapshot():
    """Records the watched modules: {name: _Module}.

    Keeps references to the recorded objects, so identities stay comparable
    (a replaced object cannot be freed and its id reused).
    """
    snap = {}
    for name, module in list(sys.modules.items()):
        if module is None or not _watched(name):
            continue
        try:
            namespace = dict(vars(module))
        except TypeError:
            continue
        snap[name] = _Module(module, namespace)
    return snap


def compare(before):
    """Returns a list of human-readable changes since the snapshot ``before`` (empty: unchanged)."""
    changes = []
    modules = sys.modules
    for name, recorded in before.items():
        module, namespace, code = recorded.module, recorded.namespace, recorded.code
        if modules.get(name) is not module:
            changes.append(f"module {name} was removed or replaced in sys.modules")
            continue
        current = vars(module)
        if recorded.unchanged(current):
            continue
        for attr, value in namespace.items():
            now = current.get(attr, _MISSING)
            if now is value:
                continue
            if now is _MISSING:
                changes.append(f"{name}.{attr} was deleted")
            elif _tracked(value):
                changes.append(f"{name}.{attr} was replaced or patched")
        if len(current) != len(namespace) or current.keys() != namespace.keys():
            for attr in current.keys() - namespace.keys():
                if not (name == "builtins" and attr == "_") and not isinstance(current[attr], types.ModuleType):
                    changes.append(f"{name}.{attr} was added")
        for attr, (fn_code, defaults) in code.items():
            fn = namespace[attr]
            if fn.__code__ is not fn_code or fn.__defaults__ is not defaults:
                changes.append(f"{name}.{attr} was replaced or patched (code)")
        if len(changes) > 20:
            break
    return changes


_MISSING = object()
