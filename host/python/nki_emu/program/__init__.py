"""A kernel's program: what an NKI kernel asks of the API, recorded without data (issue 34).

An NKI kernel's instruction stream does not depend on its data, and on Trainium
the device runs the compiled program, not the kernel's Python. The emulator
keeps the same split between untrusted and trusted code:

1. **Tracing** (:func:`record`, in the candidate's sandboxed process): the kernel
   runs once on placeholders (tensor arguments of the right shape and dtype
   holding zeros) and every use of the NKI API is recorded
   (:mod:`nki_emu.program.recorder`). The result is the program: a JSON document
   that names emulator objects by handle number and carries only literals
   (:mod:`nki_emu.program.values`).
2. **Execution** (:func:`kernel_from`, in a process that never loads candidate
   code): the program is checked and replayed on the real inputs by the same
   emulator (:mod:`nki_emu.program.replay`); outputs and the cost model's
   latency come from this run only.

Program (JSON object): ``format`` ("accelopt-nki-program"), ``version`` (1),
``kernel_file`` and ``name`` (for messages), ``params`` ([{``name``,
``annotation``: null | {``mutable``, ``shape``}}], the kernel's positional
parameters), ``args`` (the outcome pattern binding the arguments to handles),
``handles`` (how many handle numbers it uses), ``ops`` and ``result`` (the
returned value, encoded). Operations, in order:

* ``["g", target, name, outcome, line]``: attribute read; ``target`` is a
  handle number or a root module name (``"neuronxcc.nki.language"``);
* ``["c", target, [args], [[key, value]...], outcome, line]``: call;
* ``["o", operator, [operands], outcome, line]``: an operator of
  :data:`nki_emu.program.recorder.OPERATORS` (``add``, ``iadd``, ``getitem``,
  ``setitem``, ``iter``, ``next``, ...);
* ``["r", handle, [block indices]]``: a liveness release (nki_emu.liveness).

An outcome is ``{"h": n}`` (a new handle), ``{"=": literal}`` (checked on
replay), ``{"t"|"l": [outcomes]}``, or ``{"raise": "ExceptionName"}`` (the
kernel caught it; it must be raised again).
"""
import gc
import inspect
import json
import sys

from . import state
from .values import FORMAT, VERSION, ProgramError  # noqa: F401


def _annotation(value):
    from .. import typing as nki_typing
    if isinstance(value, nki_typing.Annotation):
        shape = list(value.shape) if value.shape is not None else None
        if shape is not None and not all(type(d) is int for d in shape):
            shape = None
        return {"mutable": bool(value.mutable), "shape": shape}
    return None


def _no_members(value):
    """An argument with no input set: arrays become (0,) + shape (nothing to hold)."""
    import numpy as np
    if isinstance(value, np.ndarray):
        return np.empty((0,) + value.shape, value.dtype)
    if isinstance(value, (tuple, list)):
        return type(value)(_no_members(v) for v in value)
    return value


def record(load, args, kernel_file, target="trn1"):
    """Traces a kernel and returns its program (a dict; :func:`dumps` serialises it).

    ``load()``: executes the kernel's module and returns its kernel callable; it is
    called with the recording modules installed, so the module's imports get them.
    ``args``: the kernel's arguments as for ``nki_emu.run`` (placeholder arrays: the
    values are never looked at by the program). Raises what loading or running the
    kernel raises (NKICompileError, UnwrittenOutputError, ...) and ProgramError
    for what cannot be part of a program.
    """
    import nki_emu
    from .recorder import ROOT_NAMES, Recorder, kernel_function
    nki_emu.install()
    # The cyclic collector would rescan the growing program (hundreds of thousands of
    # containers) again and again; a trace holds no values, so what cycles it makes are small.
    collecting = gc.isenabled()
    gc.disable()
    recorder = Recorder(kernel_file)
    recorder.install({name: sys.modules[name] for name in ROOT_NAMES})
    try:
        kernel = load()
        fn = kernel_function(kernel)
        if not callable(fn):
            raise ProgramError(f"{kernel_file}: the kernel is not a function")
        try:
            params = list(inspect.signature(fn).parameters.values())[:len(args)]
        except (TypeError, ValueError):
            params = []
        params = [p.replace(annotation=recorder.unwrap(p.annotation), kind=inspect.Parameter.POSITIONAL_OR_KEYWORD,
                            default=inspect.Parameter.empty) for p in params]
        outcome = {}

        def traced(*bound):
            values, patterns = [], []
            for value in bound:
                kernel_value, pattern = recorder.wrap(value)
                values.append(kernel_value)
                patterns.append(pattern)
            outcome["args"] = {"t": patterns}
            result = fn(*values)
            outcome["result"] = recorder.encode(result)
            return recorder.unwrap(result)

        traced.__signature__ = inspect.Signature(params)
        with nki_emu._RUN_LOCK:
            # A run of zero members: every storage array has a leading axis of length 0
            # (docs/nki-emulator.md, "Batched execution"), so the kernel's instructions are
            # validated on their shapes while no value is ever computed or held.
            nki_emu._execute_locked(traced, [_no_members(a) for a in args], {}, target, None, False,
                                    members=0, trace_member=0, batched=True)
    finally:
        recorder.uninstall()
        if collecting:
            gc.enable()
    return {"format": FORMAT, "version": VERSION, "kernel_file": kernel_file,
            "name": getattr(fn, "__name__", "kernel"),
            "params": [{"name": p.name, "annotation": _annotation(p.annotation)} for p in params],
            "args": outcome["args"], "handles": recorder.count, "ops": recorder.ops, "result": outcome["result"]}


def kernel_from(data):
    """A function that runs the program in ``data`` (bytes, str or a parsed dict) when
    ``nki_emu.run``/``run_batched`` call it as a kernel (nki_emu.program.replay)."""
    from . import replay
    return replay.kernel_from(data)


def dumps(program):
    """The program as compact UTF-8 JSON bytes."""
    return json.dumps(program, separators=(",", ":"), allow_nan=False).encode("utf-8")


__all__ = ["record", "dumps", "kernel_from", "ProgramError", "state", "FORMAT", "VERSION"]
