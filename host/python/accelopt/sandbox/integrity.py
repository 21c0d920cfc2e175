"""Worker self-check: NumPy, builtins and the backend modules are what they were.

:func:`snapshot` records, for every watched module, the identity of each
callable, class and submodule it holds (and of each Python function's code
object); :func:`compare` lists what a candidate changed: replaced or deleted
functions (``numpy.allclose = ...``, ``f.__code__ = ...``) and new non-module
attributes (``numpy._cache = {}``); :func:`content_digests` /
:func:`compare_digests` catch in-place edits of the cost model. The
candidate process checks itself after its call and a non-empty difference
fails the candidate (docs/isolation.md, rule R5); the process is discarded
either way.
"""
import hashlib
import marshal
import operator
import sys
import types

# Module name prefixes whose namespaces are watched.
WATCHED_PREFIXES = ("numpy", "builtins", "nki_emu", "neuronxcc", "nki", "accelopt", "json", "math",
                    "base64", "hashlib", "io")


# Prefixes left out of the watch; on the neuron backend the SDK's own modules
# (it caches and lazily imports while compiling, and the latency comes from
# the device, profiled by the host: docs/trainium.md). See unwatch_sdk().
_UNWATCHED_PREFIXES = []


def unwatch_sdk():
    """Stops watching the Neuron SDK's modules (``neuronxcc``, ``nki``); called by a neuron worker at startup."""
    _UNWATCHED_PREFIXES.extend(("neuronxcc", "nki"))


def _watched(name):
    if any(name == p or name.startswith(p + ".") for p in _UNWATCHED_PREFIXES):
        return False
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


def watched_modules():
    """The modules rule R5 watches, as a list of (name, module), for the C++ identity check (host/src/worker/identity_check.h)."""
    return [(name, module) for name, module in list(sys.modules.items())
            if module is not None and _watched(name) and isinstance(module, types.ModuleType)]


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


# --- Content digests -------------------------------------------------------
#
# Identity checks miss in-place edits: `targets.TRN1.clock_ghz["tensor"] = 1e9`
# keeps every object where it was while the cost model now flatters the
# candidate. The modules that turn a trace into a latency are therefore also
# hashed by content: module data, class attributes, dataclass fields, function
# code, defaults and closure cells, recursively. A candidate whose call leaves
# a different digest is refused (forbidden_access) and its latency discarded.

DIGESTED_PREFIXES = ("nki_emu.cost", "nki_emu.trace")
_MAX_DEPTH = 12


def _feed(update, value, depth, seen):
    kind = type(value)
    if value is None or kind in (bool, int, float, complex, str, bytes):
        update(f"{kind.__name__}:{value!r};".encode("utf-8", "backslashreplace"))
        return
    if depth > _MAX_DEPTH:
        update(b"deep;")
        return
    key = id(value)
    if key in seen:
        update(b"seen;")
        return
    seen.add(key)
    if kind in (list, tuple):
        update(f"{kind.__name__}[{len(value)}]".encode())
        for item in value:
            _feed(update, item, depth + 1, seen)
    elif kind is dict:
        update(f"dict[{len(value)}]".encode())
        for k, v in value.items():
            _feed(update, k, depth + 1, seen)
            _feed(update, v, depth + 1, seen)
    elif kind in (set, frozenset):
        update(f"set[{len(value)}]".encode())
        for text in sorted(repr(item) for item in value):
            update(text.encode("utf-8", "backslashreplace"))
    elif isinstance(value, types.ModuleType):
        update(f"module:{value.__name__};".encode())
    elif isinstance(value, types.FunctionType):
        update(marshal.dumps(value.__code__))
        _feed(update, value.__defaults__, depth + 1, seen)
        _feed(update, value.__kwdefaults__, depth + 1, seen)
        for cell in value.__closure__ or ():
            try:
                _feed(update, cell.cell_contents, depth + 1, seen)
            except ValueError:  # an empty cell
                update(b"empty;")
    elif isinstance(value, type):
        update(f"class:{value.__qualname__}".encode())
        for name, attr in list(vars(value).items()):
            if name not in ("__dict__", "__weakref__", "__doc__", "__module__"):
                update(name.encode())
                _feed(update, attr, depth + 1, seen)
    elif isinstance(value, (staticmethod, classmethod)):
        _feed(update, value.__func__, depth + 1, seen)
    elif isinstance(value, property):
        for part in (value.fget, value.fset, value.fdel):
            _feed(update, part, depth + 1, seen)
    elif kind.__module__ == "numpy" and hasattr(value, "tobytes") and hasattr(value, "dtype"):
        update(f"array:{value.dtype}:{getattr(value, 'shape', ())}".encode())
        update(value.tobytes())
    elif hasattr(value, "__dict__") or hasattr(kind, "__slots__"):
        update(f"object:{kind.__module__}.{kind.__qualname__}".encode())
        fields = dict(getattr(value, "__dict__", {}))
        for slot in getattr(kind, "__slots__", ()):
            if isinstance(slot, str) and hasattr(value, slot):
                fields[slot] = getattr(value, slot)
        for name in sorted(fields):
            update(name.encode())
            _feed(update, fields[name], depth + 1, seen)
    else:  # builtins, ufuncs, descriptors: their identity is what snapshot() checks
        update(f"opaque:{kind.__module__}.{kind.__qualname__}:{getattr(value, '__qualname__', '')};".encode())


def content_digests():
    """SHA-256 (hex) of every loaded module under DIGESTED_PREFIXES: {module name: digest}.

    Covers module-level data, classes (their attributes), dataclass and
    plain-object fields, function code (marshal bytes), defaults and
    closure cells, to depth 12. Objects of C types are represented by their
    type name (their identity is checked by :func:`compare`).
    """
    digests = {}
    for name, module in sorted(sys.modules.items()):
        if module is None or not any(name == p or name.startswith(p + ".") for p in DIGESTED_PREFIXES):
            continue
        digest = hashlib.sha256()
        seen = set()
        for attr, value in sorted(vars(module).items()):
            if attr.startswith("__") and attr.endswith("__"):
                continue
            digest.update(attr.encode())
            _feed(digest.update, value, 0, seen)
        digests[name] = digest.hexdigest()
    return digests


def compare_digests(before):
    """Lists the modules of ``before`` (from :func:`content_digests`) whose content changed."""
    now = content_digests()
    return [f"{name} changed in place (content digest differs)" for name, digest in before.items()
            if now.get(name) != digest]
