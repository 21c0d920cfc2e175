"""Executing a kernel's program on real inputs (the trusted side; no candidate code).

:func:`kernel_from` turns a program (``nki_emu.program``) into a function that
``nki_emu.run``/``run_batched`` call like a kernel: it binds the arguments to
their handles and performs the operations in order on the real emulator
objects. Every operation is checked against what the NKI API offers, and
nothing else is done:

* attribute reads only from the NKI namespaces (public API names) and a short
  list of public tensor/index attributes (:data:`ATTRIBUTES`);
* calls only of NKI API functions and of those listed tensor methods;
* operators only with an emulator object as an operand, loop steps only on the
  emulator's own loop generators;
* arguments are literals (``nki_emu.program.values``) or earlier results.

A literal the trace saw (a shape, a loop bound) must come out the same, and an
exception the kernel caught while tracing must be raised again; otherwise the
program depends on data, which NKI does not allow (``ProgramDivergence``). The
replayer drops each result after its last use, so tiles die as early as in the
kernel, and performs the liveness releases the trace recorded.
"""
import gc
import inspect
import json
import types

from .. import language, runtime, tensor
from .. import typing as nki_typing
from . import state
from .recorder import LAUNCHERS, OPERATORS, PASSED_AS_IS
from .values import CONSTANT_BYTES, FORMAT, VERSION, ProgramError, decode, same

# Largest serialised program accepted (bytes).
MAX_PROGRAM_BYTES = 512 << 20

# Public attributes of emulator objects a program may read (by class name).
ATTRIBUTES = {
    "NkiTensor": frozenset({"shape", "dtype", "ndim", "size", "itemsize", "buffer", "name", "reshape", "view",
                            "broadcast_to", "expand_dims", "astype"}),
    "IndexExpr": frozenset({"shape", "ndim"}),
    "_Grid": frozenset({"p", "x", "y", "z"}),
}


class ProgramDivergence(RuntimeError):
    """The replayed program did not behave as traced: it depends on input data."""

    def __init__(self, message, kernel_file, kernel_line):
        super().__init__(message)
        self.kernel_file, self.kernel_line = kernel_file, kernel_line


def _roots():
    from .. import namespaces, nki_module
    return {"neuronxcc.nki": nki_module, "nki": nki_module,
            "neuronxcc.nki.language": namespaces.LANGUAGE, "nki.language": namespaces.LANGUAGE,
            "neuronxcc.nki.isa": namespaces.ISA, "nki.isa": namespaces.ISA,
            "neuronxcc.nki.typing": namespaces.TYPING, "nki.typing": namespaces.TYPING}


_API = None  # (roots, ids of the namespaces' public callables), built once


def _api():
    global _API
    if _API is None:
        roots = _roots()
        callables = set()
        for name, module in roots.items():
            for attr, value in vars(module).items():
                if attr.startswith("_") or attr in LAUNCHERS or attr in PASSED_AS_IS:
                    continue
                if callable(value) and not isinstance(value, types.ModuleType):
                    callables.add(id(value))
        _API = (roots, frozenset(callables))
    return _API


def _emulator_object(obj):
    """An instance of an emulator class (not a class, not the program machinery)."""
    module = type(obj).__module__ or ""
    return (module.startswith("nki_emu.") and not module.startswith("nki_emu.program")
            and not isinstance(obj, type)) or obj is language.tile_size


def _loop_generator(obj):
    return isinstance(obj, types.GeneratorType) and obj.gi_code is runtime.loop_range.__code__


def _attributes_of(obj):
    if obj is language.tile_size:
        return frozenset(n for n in dir(obj) if not n.startswith("_"))
    return ATTRIBUTES.get(type(obj).__name__, frozenset()) if _emulator_object(obj) else frozenset()


def _annotation(data):
    if data is None:
        return inspect.Parameter.empty
    if type(data) is not dict or type(data.get("mutable")) is not bool:
        raise ProgramError("malformed parameter annotation in program")
    shape = data.get("shape")
    if shape is not None and not (type(shape) is list and all(type(d) is int for d in shape)):
        raise ProgramError("malformed annotated shape in program")
    return nki_typing.Annotation(data["mutable"], tuple(shape) if shape is not None else None)


def _handles_in(data, out):
    """Adds the handle numbers an encoded value refers to."""
    kind = type(data)
    if kind is dict:
        if "h" in data:
            out.append(data["h"])
        else:
            for value in data.values():
                _handles_in(value, out)
    elif kind is list:
        for value in data:
            _handles_in(value, out)


class Replayer:
    """One parsed and checked program; :meth:`run` executes it on bound arguments."""

    def __init__(self, program):
        if type(program) is not dict or program.get("format") != FORMAT or program.get("version") != VERSION:
            raise ProgramError(f"not a version {VERSION} {FORMAT}")
        self.file = str(program.get("kernel_file", "<kernel>"))
        self.name = str(program.get("name", "kernel"))
        self.count = program.get("handles")
        self.ops = program.get("ops")
        self.args = program.get("args")
        self.result = program.get("result")
        params = program.get("params")
        if type(self.ops) is not list or type(params) is not list:
            raise ProgramError("malformed program header")
        # every handle is made by an operation (a few per operation) or is an argument
        if type(self.count) is not int or not 0 <= self.count <= 16 * len(self.ops) + 4096:
            raise ProgramError("malformed program header: handle count out of range")
        parameters = []
        for p in params:
            if type(p) is not dict or type(p.get("name")) is not str or not p["name"].isidentifier():
                raise ProgramError("malformed parameter in program")
            parameters.append(inspect.Parameter(p["name"], inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                annotation=_annotation(p.get("annotation"))))
        self.signature = inspect.Signature(parameters)
        self.frees = self._plan_frees()

    def _plan_frees(self):
        """Per operation, the handles whose last use it is (dropped right after it)."""
        last = {}
        for index, op in enumerate(self.ops):
            if type(op) is not list or not op:
                raise ProgramError(f"malformed operation {index} in program")
            used = []
            head = op[0]
            if head in ("g", "c", "r") and len(op) > 1 and type(op[1]) is int:
                used.append(op[1])
            if head in ("c", "o"):
                _handles_in(op[2:4] if head == "c" else op[2], used)
            defined = []
            if head in ("g", "c", "o") and len(op) >= 2:
                _handles_in(op[-2], defined)
            for h in used + defined:
                last[h] = index
        kept = []
        _handles_in(self.result, kept)
        frees = [[] for _ in self.ops]
        for h, index in last.items():
            if h not in kept and type(h) is int:
                frees[index].append(h)
        return frees

    # --- execution ----------------------------------------------------------------------
    def run(self, args):
        slots = [None] * self.count
        filled = bytearray(self.count)
        budget = [CONSTANT_BYTES]

        def slot(n):
            if type(n) is not int or not 0 <= n < self.count or not filled[n]:
                raise ProgramError(f"program uses handle {n!r} before it was made")
            return slots[n]

        def bind(pattern, value, line):
            if type(pattern) is not dict or len(pattern) != 1:
                raise ProgramError("malformed outcome in program")
            if "h" in pattern:
                n = pattern["h"]
                if type(n) is not int or not 0 <= n < self.count:
                    raise ProgramError(f"program defines handle {n!r} outside its range")
                slots[n] = value
                filled[n] = 1
            elif "=" in pattern:
                expected = decode(pattern["="], slot, [CONSTANT_BYTES])
                if not same(expected, value):
                    raise ProgramDivergence(f"{self.file}:{line}: the kernel's program depends on input data: "
                                            f"traced {expected!r}, got {value!r}", self.file, line)
            elif "t" in pattern or "l" in pattern:
                kind = tuple if "t" in pattern else list
                parts = pattern["t" if kind is tuple else "l"]
                if type(value) is not kind or type(parts) is not list or len(parts) != len(value):
                    raise ProgramDivergence(f"{self.file}:{line}: the kernel's program depends on input data "
                                            f"(a different result structure)", self.file, line)
                for p, v in zip(parts, value):
                    bind(p, v, line)
            else:
                raise ProgramError("malformed outcome in program")

        if type(self.args) is not dict or "t" not in self.args:
            raise ProgramError("malformed argument list in program")
        bind(self.args, tuple(args), 0)
        state.REPLAY_LOCATION = (self.file, 0)
        try:
            for index, op in enumerate(self.ops):
                self._step(op, slot, bind, budget)
                for h in self.frees[index]:
                    slots[h] = None
            return decode(self.result, slot, budget)
        finally:
            state.REPLAY_LOCATION = None

    def _step(self, op, slot, bind, budget):
        head = op[0]
        if head == "r":
            self._release(op, slot)
            return
        if len(op) < 4:
            raise ProgramError("malformed operation in program")
        line = op[-1] if type(op[-1]) is int else 0
        outcome = op[-2]
        state.REPLAY_LOCATION = (self.file, line)
        if head == "g":
            target, name = op[1], op[2]
            if type(name) is not str or name.startswith("_"):
                raise ProgramError(f"{self.file}:{line}: program reads a private attribute")
            if type(target) is str:
                fn = self._root_attribute(target, name, line)
            else:
                obj = slot(target)
                if name not in _attributes_of(obj):
                    raise ProgramError(f"{self.file}:{line}: program reads '.{name}' of a "
                                       f"{type(obj).__name__}, which the NKI API does not offer")
                fn = lambda: getattr(obj, name)  # noqa: E731
        elif head == "c":
            target = slot(op[1])
            self._check_call(target, line)
            if type(op[2]) is not list or type(op[3]) is not list:
                raise ProgramError("malformed call in program")
            args = [decode(a, slot, budget) for a in op[2]]
            kwargs = {}
            for pair in op[3]:
                if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str:
                    raise ProgramError("malformed keyword argument in program")
                kwargs[pair[0]] = decode(pair[1], slot, budget)
            fn = lambda: target(*args, **kwargs)  # noqa: E731
        elif head == "o":
            name = op[1]
            function = OPERATORS.get(name) if type(name) is str else None
            if function is None or type(op[2]) is not list:
                raise ProgramError(f"{self.file}:{line}: unknown operator {name!r} in program")
            args = [decode(a, slot, budget) for a in op[2]]
            self._check_operands(name, args, line)
            fn = lambda: function(*args)  # noqa: E731
        else:
            raise ProgramError(f"unknown operation {head!r} in program")
        expected_raise = outcome.get("raise") if type(outcome) is dict else None
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001 - compared with the trace, else the kernel's failure
            if expected_raise is not None and type(exc).__name__ == expected_raise and not isinstance(exc, MemoryError):
                return  # the kernel caught it while tracing
            if not isinstance(exc, ProgramError):
                _locate(exc, self.file, line)
            raise
        if expected_raise is not None:
            raise ProgramDivergence(f"{self.file}:{line}: the kernel's program depends on input data: "
                                    f"{expected_raise} was raised while tracing, not now", self.file, line)
        bind(outcome, result, line)

    def _root_attribute(self, root, name, line):
        roots, _ = _api()
        module = roots.get(root)
        if module is None or name in LAUNCHERS or name in PASSED_AS_IS or name not in vars(module):
            raise ProgramError(f"{self.file}:{line}: program reads {root}.{name}, which is not NKI API")
        value = vars(module)[name]
        if isinstance(value, types.ModuleType):
            raise ProgramError(f"{self.file}:{line}: program reads the module {root}.{name}")
        return lambda: value

    def _check_call(self, target, line):
        _, callables = _api()
        if id(target) in callables:
            return
        if isinstance(target, types.MethodType) and _emulator_object(target.__self__) \
                and target.__func__.__name__ in _attributes_of(target.__self__):
            return
        raise ProgramError(f"{self.file}:{line}: program calls {type(target).__name__} "
                           f"{getattr(target, '__name__', '')!r}, which is not NKI API")

    def _check_operands(self, name, args, line):
        if name == "next":
            if len(args) == 1 and _loop_generator(args[0]):
                return
        elif name == "iter":
            if len(args) == 1 and (_loop_generator(args[0]) or _emulator_object(args[0])):
                return
        elif any(_emulator_object(a) for a in args):
            expected = 3 if name == "setitem" else 1 if name in ("neg", "pos", "abs", "invert", "len", "truth", "index",
                                                                  "int", "float") else 2
            if len(args) == expected:
                return
        raise ProgramError(f"{self.file}:{line}: operator {name} on these operands is not NKI API")

    def _release(self, op, slot):
        if len(op) != 3 or type(op[2]) is not list or not all(type(b) is int for b in op[2]):
            raise ProgramError("malformed release in program")
        root = slot(op[1])
        if not isinstance(root, tensor.NkiTensor) or root.root is not root:
            raise ProgramError("program releases blocks of something that is not a tensor")
        blocks = tensor.blocks_of(root)
        if not blocks:
            return
        dead = [b for b in op[2] if b in blocks]
        for b in dead:
            del blocks[b]
        cow = tensor.cow_of(root)
        if dead and isinstance(cow, set):
            cow.difference_update(dead)


def _locate(exc, filename, line):
    """Lets the harness name the kernel's line (accelopt.loading.kernel_location)."""
    try:
        if not isinstance(getattr(exc, "kernel_file", None), str):
            exc.kernel_file, exc.kernel_line = filename, line
    except AttributeError:
        pass


def parse(data):
    """The program in ``data`` (bytes/str of its JSON); raises ProgramError."""
    if len(data) > MAX_PROGRAM_BYTES:
        raise ProgramError(f"program of {len(data)} bytes exceeds {MAX_PROGRAM_BYTES}")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ProgramError(f"program is not valid JSON: {exc}") from exc


def kernel_from(data):
    """A function that runs the program in ``data`` (bytes, str or parsed dict) when
    ``nki_emu.run``/``run_batched`` call it as a kernel. Raises ProgramError."""
    # Parsed with the cyclic collector off, then frozen: the program's many small containers
    # live as long as the replay, and rescanning them at every collection cost more than parsing.
    collecting = gc.isenabled()
    gc.disable()
    try:
        replayer = Replayer(parse(data) if isinstance(data, (bytes, bytearray, memoryview, str)) else data)
    finally:
        gc.freeze()
        if collecting:
            gc.enable()

    def replayed_kernel(*args):
        return replayer.run(args)

    replayed_kernel.__signature__ = replayer.signature
    replayed_kernel.__name__ = replayer.name
    return replayed_kernel

