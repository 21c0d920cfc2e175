"""Tracing an untrusted kernel into its program (runs in the candidate's sandboxed process).

While a :class:`Recorder` is active, the NKI modules a kernel imports
(``neuronxcc.nki``, ``nki`` and their ``language``/``isa``/``typing``) are
:class:`RootModule` objects, and every emulator object the kernel receives is a
:class:`Handle`. Each thing the kernel does with the API (an attribute read, a
call, an operator, indexing, a loop step) is done to the real emulator object
behind the handle and appended to the program as one operation, with its
arguments encoded by :mod:`nki_emu.program.values` and its outcome (new handles,
literal results, or the exception the kernel caught). The kernel runs on
placeholders: its tensor arguments hold zeros, so nothing it computes outside the
NKI instructions can depend on an input value. The recorder is not a security
boundary; a candidate may tamper with it, and then it only changes the program it
hands over, which the trusted replayer checks and executes like any other.
"""
import operator
import sys
import types
import weakref

from . import state
from .values import CONSTANT_BYTES, ProgramError, encode, is_literal_type

_PLAIN_TYPES = frozenset({type(None), bool, int, float, str})
_LITERAL_TYPES = {}  # type -> whether its values are literals (cached is_literal_type)
_new_handle = object.__new__
_NO = object()  # an operand that rules out the memo of pure operations

# Operators a handle records: name -> the operator the replayer applies.
BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
          "lshift", "rshift")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
UNARY = ("neg", "pos", "abs", "invert")
# Names of nki / neuronxcc.nki that wrap or launch a kernel: transparent while tracing (the
# traced kernel is one program) and absent from replayed programs.
LAUNCHERS = ("jit", "trace", "baremetal", "simulate_kernel", "benchmark", "profile")
# Names of nki / neuronxcc.nki handed to the kernel as they are (classes for isinstance and
# except clauses); they cannot be passed to the API.
PASSED_AS_IS = ("tensor", "NKICompileError")
SUBMODULES = ("language", "isa", "typing")
ROOT_NAMES = ("neuronxcc", "neuronxcc.nki", "neuronxcc.nki.language", "neuronxcc.nki.isa", "neuronxcc.nki.typing",
              "nki", "nki.language", "nki.isa", "nki.typing")


def _recorder():
    recorder = state.RECORDER
    if recorder is None:
        raise RuntimeError("an NKI handle was used after its kernel's trace ended")
    return recorder


class Handle:
    """An emulator object as a traced kernel sees it; every use is recorded."""

    __slots__ = ("_hid", "_obj")
    __array_ufunc__ = None  # NumPy scalars on the left defer to the reflected operator
    __hash__ = object.__hash__

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(f"'{type(self._obj).__name__}' object has no attribute '{name}'")
        return _recorder().getattr(self, name)

    def __call__(self, *args, **kwargs):
        return _recorder().call(self, args, kwargs)

    def __getitem__(self, key):
        return _recorder().op("getitem", (self, key))

    def __setitem__(self, key, value):
        _recorder().op("setitem", (self, key, value))

    def __iter__(self):
        return _recorder().op("iter", (self,))

    def __next__(self):
        return _recorder().op("next", (self,))

    def __len__(self):
        return _recorder().op("len", (self,))

    def __bool__(self):
        return _recorder().op("truth", (self,))

    def __index__(self):
        return _recorder().op("index", (self,))

    def __int__(self):
        return _recorder().op("int", (self,))

    def __float__(self):
        return _recorder().op("float", (self,))

    def __repr__(self):
        return repr(self._obj)

    def __str__(self):
        return str(self._obj)

    def __format__(self, spec):
        return format(self._obj, spec)


def _binary(name):
    def forward(self, other):
        return _recorder().op(name, (self, other))

    def reflected(self, other):
        return _recorder().op(name, (other, self))

    def inplace(self, other):
        return _recorder().op("i" + name, (self, other))
    return forward, reflected, inplace


for _name in BINARY:
    _f, _r, _i = _binary(_name)
    setattr(Handle, f"__{_name}__", _f)
    setattr(Handle, f"__r{_name}__", _r)
    setattr(Handle, f"__i{_name}__", _i)
for _name in COMPARE + UNARY:
    setattr(Handle, f"__{_name}__", (lambda n: lambda self, *other: _recorder().op(n, (self,) + other))(_name))


def _transparent_launcher(name):
    """The tracing stand-in of ``nki.<name>``: the kernel it wraps runs inline."""
    def launch(kernel=None, *args, **options):
        if name == "simulate_kernel":
            return kernel_function(kernel)(*args, **options)
        if kernel is None or not callable(kernel):
            return lambda k: launch(k)
        if name in ("jit", "trace"):
            return TracedKernel(kernel)
        return lambda *a: kernel_function(kernel)(*a)
    return launch


def kernel_function(kernel):
    return getattr(kernel, "__nki_function__", kernel)


class TracedKernel:
    """``@nki.jit`` while tracing: calling it runs the function inline."""

    def __init__(self, func):
        self.__nki_function__ = func
        self.__name__ = getattr(func, "__name__", "kernel")

    def __call__(self, *args, **kwargs):
        return self.__nki_function__(*args, **kwargs)


class RootModule(types.ModuleType):
    """One NKI module name as a traced kernel imports it."""

    def __init__(self, name, real, children):
        super().__init__(name)
        self.__path__ = []
        self.__nki_emu__ = True  # nki_emu.install() must leave the recording modules in place
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_children", children)
        if not children:  # a star import binds the namespace's public names
            self.__all__ = [n for n in dir(real) if not n.startswith("_")]

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        child = self._children.get(name)
        if child is not None:
            return child
        real = self._real
        if name in LAUNCHERS and self.__name__ in ("neuronxcc.nki", "nki"):
            value = _transparent_launcher(name)
        elif name in PASSED_AS_IS and self.__name__ in ("neuronxcc.nki", "nki"):
            value = getattr(real, name)
        else:
            value = _recorder().root_getattr(self.__name__, real, name)
        setattr(self, name, value)  # later reads find it without recording again
        return value


class Recorder:
    """Collects one traced kernel's program (see the package docstring for its form)."""

    def __init__(self, kernel_file):
        self.kernel_file = kernel_file
        self.ops = []
        self.count = 0
        self.budget = [CONSTANT_BYTES]
        self.saved_modules = None
        self.tensors = {}  # id(emulator tensor) -> (weak reference, handle number): liveness releases name them
        self.memo = {}  # pure operation -> the handle of its result (see _pure)
        from .. import namespaces
        from ..index_expr import IndexExpr, Predicate
        self.index_types = frozenset({IndexExpr, Predicate})
        self.arange = namespaces.LANGUAGE.arange

    # --- values -------------------------------------------------------------------------
    def encode(self, value):
        try:
            return encode(value, Handle, self.budget)
        except ProgramError as exc:
            exc.line = exc.line or self.line()
            raise

    def unwrap(self, value):
        kind = type(value)
        if kind is Handle:
            return value._obj
        if kind in _PLAIN_TYPES:
            return value
        if kind is RootModule:
            return value._real
        if kind is tuple:
            return tuple(self.unwrap(v) for v in value)
        if kind is list:
            return [self.unwrap(v) for v in value]
        if kind is dict:
            return {k: self.unwrap(v) for k, v in value.items()}
        if kind is slice:
            return slice(self.unwrap(value.start), self.unwrap(value.stop), self.unwrap(value.step))
        return value

    def new_handle(self, obj):
        handle = _new_handle(Handle)
        handle._hid = self.count
        handle._obj = obj
        if type(obj) is _TENSOR_TYPE[0]:
            self.tensors[id(obj)] = (weakref.ref(obj), self.count)
        self.count += 1
        return handle

    def wrap(self, value):
        """(what the kernel gets, outcome pattern): literals as they are, other objects
        as new handles, tuples and lists element by element."""
        kind = type(value)
        if kind is tuple or kind is list:
            parts = [self.wrap(v) for v in value]
            if all("=" in p for _, p in parts):
                return value, {"=": self.encode(value)}
            items = [v for v, _ in parts]
            return (tuple(items) if kind is tuple else items), {"t" if kind is tuple else "l": [p for _, p in parts]}
        literal = _LITERAL_TYPES.get(kind)
        if literal is None:
            literal = _LITERAL_TYPES[kind] = is_literal_type(kind)
        if literal:
            try:
                return value, {"=": encode(value, Handle, [0])}
            except ProgramError:
                pass  # e.g. an array: the program names it
        handle = self.new_handle(value)
        return handle, {"h": handle._hid}

    def line(self):
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.kernel_file:
                return frame.f_lineno
            frame = frame.f_back
        return 0

    # --- operations ---------------------------------------------------------------------
    def _record(self, head, fn, args):
        """Runs ``fn`` and appends ``head + [outcome, line]``; re-raises what it raised."""
        line = self.line()
        try:
            result = fn()
        except StopIteration:
            self.ops.append(head + [{"raise": "StopIteration"}, line])
            raise
        except Exception as exc:
            self.ops.append(head + [{"raise": type(exc).__name__}, line])
            raise
        value, pattern = self.wrap(result)
        self.ops.append(head + [pattern, line])
        return value

    def root_getattr(self, root_name, real, name):
        value = getattr(real, name)
        wrapped, pattern = self.wrap(value)
        if "=" not in pattern:  # a literal needs no operation
            self.ops.append(["g", root_name, name, pattern, self.line()])
        return wrapped

    def getattr(self, handle, name):
        return self._record(["g", handle._hid, name], lambda: getattr(handle._obj, name), ())

    def _both(self, value):
        """(JSON form, emulator value) of an argument, in one pass over it."""
        kind = type(value)
        if kind is Handle:
            return {"h": value._hid}, value._obj
        if kind is int or kind is str or kind is bool or value is None:
            return value, value
        if kind is tuple:
            parts = [self._both(v) for v in value]
            return {"t": [p[0] for p in parts]}, tuple(p[1] for p in parts)
        return self.encode(value), self.unwrap(value)

    def _key(self, value):
        """A hashable key of an operand for :meth:`_pure` (handles as ("h", n), literals with
        their type where == would confuse them), or _NO when the operand rules the memo out.
        Runs for every operator a traced kernel applies: loops, early exits."""
        kind = type(value)
        if kind is Handle:
            return ("h", value._hid) if type(value._obj) in self.index_types else _NO
        if kind is int or value is None:
            return value
        if kind is tuple:
            out = ["t"]
            for item in value:
                part = self._key(item)
                if part is _NO:
                    return _NO
                out.append(part)
            return tuple(out)
        if kind is slice:
            out = ["sl"]
            for item in (value.start, value.stop, value.step):
                part = self._key(item)
                if part is _NO:
                    return _NO
                out.append(part)
            return tuple(out)
        if kind is float or kind is bool or kind is str:
            return (kind.__name__, value)
        return _NO

    def _pure(self, key, run):
        """A pure operation on index expressions (nl.arange, their arithmetic and
        indexing: immutable values) repeated with the same operands gives the handle of
        its first result: nothing is recorded, and the program is shorter."""
        if key is _NO:
            return run()
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        value = run()
        if len(self.memo) >= MEMO_SIZE:
            self.memo.clear()
        if type(value) is Handle and type(value._obj) in self.index_types:
            self.memo[key] = value
        return value

    def call(self, handle, args, kwargs):
        if handle._obj is self.arange and not kwargs:
            key = self._key(args)
            return self._pure(_NO if key is _NO else ("arange", key), lambda: self._call(handle, args, kwargs))
        return self._call(handle, args, kwargs)

    def _call(self, handle, args, kwargs):
        both = [self._both(a) for a in args]
        encoded = [b[0] for b in both]
        real_args = [b[1] for b in both]
        encoded_kw = []
        real_kwargs = {}
        for k, v in kwargs.items():
            e, r = self._both(v)
            encoded_kw.append([k, e])
            real_kwargs[k] = r
        target = handle._obj
        return self._record(["c", handle._hid, encoded, encoded_kw], lambda: target(*real_args, **real_kwargs), args)

    def op(self, name, args):
        if name in _PURE_OPERATORS:
            key = self._key(args)
            return self._pure(_NO if key is _NO else (name, key), lambda: self._op(name, args))
        return self._op(name, args)

    def _op(self, name, args):
        both = [self._both(a) for a in args]
        encoded = [b[0] for b in both]
        real = [b[1] for b in both]
        fn = OPERATORS[name]
        return self._record(["o", name, encoded], lambda: fn(*real), args)

    def released(self, root, blocks):
        """Liveness freed ``blocks`` of ``root`` (nki_emu.liveness): the replayer does the same here."""
        known = self.tensors.get(id(root))
        if known is not None and known[0]() is root:
            self.ops.append(["r", known[1], [int(b) for b in blocks]])

    # --- the traced run -----------------------------------------------------------------
    def install(self, real_modules):
        """Places recording modules under the NKI names (``real_modules``: name -> module)."""
        self.saved_modules = {name: sys.modules.get(name) for name in ROOT_NAMES}
        roots = {}
        for name in sorted(ROOT_NAMES, key=lambda n: -n.count(".")):
            children = {sub: roots[f"{name}.{sub}"] for sub in SUBMODULES + ("nki",) if f"{name}.{sub}" in roots}
            roots[name] = RootModule(name, real_modules[name], children)
        for name, module in roots.items():
            sys.modules[name] = module
        state.RECORDER = self
        return roots

    def uninstall(self):
        state.RECORDER = None
        for name, module in (self.saved_modules or {}).items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _tensor_type():
    from ..tensor import NkiTensor
    return NkiTensor


class _LazyType(list):
    def __getitem__(self, index):
        if not len(self):
            self.append(_tensor_type())
        return list.__getitem__(self, index)


_TENSOR_TYPE = _LazyType()  # NkiTensor, imported on first use (import order)


_PURE_OPERATORS = frozenset(BINARY + COMPARE + UNARY + ("getitem",))
MEMO_SIZE = 4096

OPERATORS = {name: getattr(operator, name + "_" if name in ("and", "or") else name) for name in BINARY + COMPARE}
OPERATORS.update({"i" + name: getattr(operator, "i" + name) for name in BINARY})
OPERATORS.update({"neg": operator.neg, "pos": operator.pos, "abs": operator.abs, "invert": operator.invert,
                  "getitem": operator.getitem, "setitem": operator.setitem, "iter": iter, "next": next,
                  "len": len, "truth": bool, "index": operator.index, "int": int, "float": float})
