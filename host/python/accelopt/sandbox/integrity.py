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


# What the worker's C++ content check (host/src/worker/content_check.h) reads
# instead of hashing: one record per mutable place the digest reads, with the
# identities it held at startup. Kinds (first item of each tuple):
W_MODULE = 0        # (kind, name, module): sys.modules[name] is module
W_DICT = 1          # (kind, dict, keys, values): same items, by identity, in order
W_LIST = 2          # (kind, list, items)
W_SET = 3           # (kind, set, items): same members by identity (items are plain values)
W_FUNCTION = 4      # (kind, function, code, defaults, kwdefaults, closure)
W_CELL = 5          # (kind, cell, contents)
W_EMPTY_CELL = 6    # (kind, cell)
W_TYPE = 7          # (kind, class, keys, values, qualname): its own dict and __qualname__
W_ATTRIBUTE = 8     # (kind, object, name, value): getattr(object, name) is value
W_ARRAY = 9         # (kind, array, bytes, buffer format, shape)
W_OBJECT = 10       # (kind, object, class, __dict__ or None)
W_SLOT = 11         # (kind, object, member descriptor, value)
W_EMPTY_SLOT = 12   # (kind, object, member descriptor)
W_MODULE_NAME = 13  # (kind, module, its __name__)
W_UNCHECKABLE = 14  # (kind, reason): the check always defers to the digest

_PLAIN = (type(None), bool, int, float, complex, str, bytes)


def _plain(value):
    return type(value) in _PLAIN or (type(value) is tuple and all(map(_plain, value)))


class _Watch(list):
    """The records of a content watch, and the ids of the classes recorded so far."""

    def __init__(self):
        super().__init__()
        self.classes = set()


def _watch_class(watch, cls):
    """Records every heap class of ``cls``'s MRO (its dict decides attribute lookups and slots)."""
    for klass in cls.__mro__:
        if id(klass) in watch.classes or not (klass.__flags__ & (1 << 9)):  # Py_TPFLAGS_HEAPTYPE
            continue
        watch.classes.add(id(klass))
        namespace = _type_dict(klass)
        watch.append((W_TYPE, klass, tuple(namespace.keys()), tuple(namespace.values()), klass.__qualname__))


def _type_dict(klass):
    """The dict behind ``vars(klass)`` (a read-only proxy of it)."""
    import gc
    inner = [r for r in gc.get_referents(vars(klass)) if type(r) is dict]
    if len(inner) != 1:
        raise TypeError(f"cannot reach the namespace of {klass!r}")
    return inner[0]


def _feed(update, value, depth, seen, watch=None):
    """Feeds ``value``'s content to ``update``; with ``watch`` (a list), also records
    what it read for the C++ content check (the W_* records above)."""
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
        if watch is not None and kind is list:
            watch.append((W_LIST, value, tuple(value)))
        update(f"{kind.__name__}[{len(value)}]".encode())
        for item in value:
            _feed(update, item, depth + 1, seen, watch)
    elif kind is dict:
        if watch is not None:
            watch.append((W_DICT, value, tuple(value.keys()), tuple(value.values())))
        update(f"dict[{len(value)}]".encode())
        for k, v in value.items():
            _feed(update, k, depth + 1, seen, watch)
            _feed(update, v, depth + 1, seen, watch)
    elif kind in (set, frozenset):
        if watch is not None:
            items = tuple(value)
            watch.append((W_SET, value, items) if all(map(_plain, items))
                         else (W_UNCHECKABLE, "a set holds values that are not plain"))
        update(f"set[{len(value)}]".encode())
        for text in sorted(repr(item) for item in value):
            update(text.encode("utf-8", "backslashreplace"))
    elif isinstance(value, types.ModuleType):
        if watch is not None:
            watch.append((W_MODULE_NAME, value, value.__name__))
        update(f"module:{value.__name__};".encode())
    elif isinstance(value, types.FunctionType):
        if watch is not None:
            watch.append((W_FUNCTION, value, value.__code__, value.__defaults__, value.__kwdefaults__,
                          value.__closure__))
        update(marshal.dumps(value.__code__))
        _feed(update, value.__defaults__, depth + 1, seen, watch)
        _feed(update, value.__kwdefaults__, depth + 1, seen, watch)
        for cell in value.__closure__ or ():
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell
                if watch is not None:
                    watch.append((W_EMPTY_CELL, cell))
                update(b"empty;")
                continue
            if watch is not None:
                watch.append((W_CELL, cell, contents))
            _feed(update, contents, depth + 1, seen, watch)
    elif isinstance(value, type):
        if watch is not None:
            namespace = _type_dict(value)
            watch.append((W_TYPE, value, tuple(namespace.keys()), tuple(namespace.values()), value.__qualname__))
        update(f"class:{value.__qualname__}".encode())
        for name, attr in list(vars(value).items()):
            if name not in ("__dict__", "__weakref__", "__doc__", "__module__"):
                update(name.encode())
                _feed(update, attr, depth + 1, seen, watch)
    elif isinstance(value, (staticmethod, classmethod)):
        if watch is not None:
            watch.append((W_ATTRIBUTE, value, "__func__", value.__func__))
        _feed(update, value.__func__, depth + 1, seen, watch)
    elif isinstance(value, property):
        for name in ("fget", "fset", "fdel"):
            part = getattr(value, name)
            if watch is not None:
                watch.append((W_ATTRIBUTE, value, name, part))
            _feed(update, part, depth + 1, seen, watch)
    elif kind.__module__ == "numpy" and hasattr(value, "tobytes") and hasattr(value, "dtype"):
        if watch is not None and not isinstance(value, _numpy_scalar()):  # scalars are immutable
            watch.append((W_ARRAY, value, value.tobytes(), memoryview(value).format, tuple(value.shape))
                         if type(value).__name__ == "ndarray" else (W_UNCHECKABLE, f"a {kind.__qualname__}"))
        update(f"array:{value.dtype}:{getattr(value, 'shape', ())}".encode())
        update(value.tobytes())
    elif hasattr(value, "__dict__") or hasattr(kind, "__slots__"):
        update(f"object:{kind.__module__}.{kind.__qualname__}".encode())
        fields = dict(getattr(value, "__dict__", {}))
        if watch is not None:
            _watch_class(watch, kind)
            own = getattr(value, "__dict__", None)
            watch.append((W_OBJECT, value, kind, own if type(own) is dict else None))
            if own is not None and type(own) is not dict:
                watch.append((W_UNCHECKABLE, f"{kind.__qualname__}.__dict__ is not a dict"))
            elif own is not None:
                watch.append((W_DICT, own, tuple(own.keys()), tuple(own.values())))
        for slot in getattr(kind, "__slots__", ()):
            if isinstance(slot, str) and hasattr(value, slot):
                fields[slot] = getattr(value, slot)
            if watch is not None and isinstance(slot, str):
                _watch_slot(watch, value, kind, slot)
        for name in sorted(fields):
            update(name.encode())
            _feed(update, fields[name], depth + 1, seen, watch)
    else:  # builtins, ufuncs, descriptors: their identity is what snapshot() checks
        if watch is not None and kind.__flags__ & (1 << 9):  # a heap type's names can be reassigned
            watch.append((W_UNCHECKABLE, f"an opaque {kind.__qualname__}"))
        update(f"opaque:{kind.__module__}.{kind.__qualname__}:{getattr(value, '__qualname__', '')};".encode())


def _numpy_scalar():
    import numpy
    return numpy.generic


def _watch_slot(watch, value, kind, slot):
    descriptor = next((vars(k)[slot] for k in kind.__mro__ if slot in vars(k)), None)
    if type(descriptor).__name__ != "member_descriptor":
        watch.append((W_UNCHECKABLE, f"{kind.__qualname__}.{slot} is not a plain slot"))
    elif hasattr(value, slot):
        watch.append((W_SLOT, value, descriptor, getattr(value, slot)))
    else:
        watch.append((W_EMPTY_SLOT, value, descriptor))


def content_digests():
    """SHA-256 (hex) of every loaded module under DIGESTED_PREFIXES: {module name: digest}.

    Covers module-level data, classes (their attributes), dataclass and
    plain-object fields, function code (marshal bytes), defaults and
    closure cells, to depth 12. Objects of C types are represented by their
    type name (their identity is checked by :func:`compare`).
    """
    digests = {}
    for name, module in _digested_modules():
        digest = hashlib.sha256()
        _feed_module(digest.update, module, None)
        digests[name] = digest.hexdigest()
    return digests


def _digested_modules():
    return [(name, module) for name, module in sorted(sys.modules.items())
            if module is not None and any(name == p or name.startswith(p + ".") for p in DIGESTED_PREFIXES)]


def _feed_module(update, module, watch):
    seen = set()
    for attr, value in sorted(vars(module).items()):
        if attr.startswith("__") and attr.endswith("__"):
            continue
        update(attr.encode())
        _feed(update, value, 0, seen, watch)


def content_watch():
    """What :func:`content_digests` reads, as identity records for the worker's C++
    content check (host/src/worker/content_check.h): a list of the W_* tuples.

    The records cover every mutable place the digest reads (module namespaces,
    dicts, lists, sets, class namespaces and names, function code, defaults
    and closure cells, object fields and slots, array bytes), so when each
    still holds the same objects the digest cannot have changed. Taken once
    in the worker after its imports; a W_UNCHECKABLE record makes the check
    always defer to :func:`compare_digests`.
    """
    watch = _Watch()
    for name, module in _digested_modules():
        watch.append((W_MODULE, name, module))
        namespace = vars(module)
        watch.append((W_DICT, namespace, tuple(namespace.keys()), tuple(namespace.values())))
        _feed_module(lambda _: None, module, watch)
    return list(watch)


def compare_digests(before):
    """Lists the modules of ``before`` (from :func:`content_digests`) whose content changed."""
    now = content_digests()
    return [f"{name} changed in place (content digest differs)" for name, digest in before.items()
            if now.get(name) != digest]
