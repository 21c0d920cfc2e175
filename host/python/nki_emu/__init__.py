"""NKI emulator: the legacy ``neuronxcc.nki`` API (NKI "Beta 1", SDK <= 2.27) on NumPy.

Public API (stable contract, docs/architecture.md "NKI emulator"):

* :func:`install` registers ``neuronxcc``/``nki`` module aliases (idempotent).
* :func:`run` executes a kernel on NumPy arrays and returns a :class:`RunResult`
  with the outputs and an estimated Trainium profile (nki-facts §3).
* :func:`run_batched` executes it once for several input sets (the kernel's
  instruction stream does not depend on data) and returns a :class:`BatchResult`.
* :func:`jit`, :func:`baremetal`, :func:`simulate_kernel`, :func:`benchmark`
  mirror the ``nki`` entry points (nki-facts §2.7).

Refusals raise :class:`nki_emu.errors.NKICompileError`. "nki-facts §N" in this
package cites docs/nki-facts.md (the NKI and Trainium facts, with their public sources).
"""
import functools
import inspect
import os
import threading
import types

import numpy as np

from . import blas_threads, coverage, isa, language, namespaces, runtime, tensor  # noqa: F401 - isa, language: loaded with the package
from . import typing as nki_typing
from .aliases import install as _install_aliases
from .errors import NKICompileError, UnwrittenOutputError, fail
from .tensor import NkiTensor, from_numpy, to_host

__all__ = ["install", "run", "RunResult", "run_batched", "BatchResult", "NotBatchable", "jit", "baremetal",
           "simulate_kernel", "benchmark", "NKICompileError", "UnwrittenOutputError"]

TARGETS = ("trn1", "trn2")


class RunResult:
    """Outcome of :func:`run`.

    ``outputs``: what the kernel returned, as NumPy arrays (an ndarray or a
    tuple of them); ``profile``: dict of estimated metrics (see
    ``nki_emu.cost.metrics.profile``), empty apart from ``target`` and
    ``estimated`` when run with ``trace=False``.
    """

    def __init__(self, outputs, profile):
        self.outputs, self.profile = outputs, profile

    def __repr__(self):
        return f"RunResult(outputs={type(self.outputs).__name__}, latency_ms={self.profile.get('latency_ms')})"


def install():
    """Makes ``neuronxcc.nki``/``nki`` (+ ``.language``, ``.isa``, ``.typing``) importable."""
    _install_aliases(nki_module)


def _kernel_function(kernel):
    return getattr(kernel, "__nki_function__", kernel)


def _to_numpy(value, member=0):
    """What the kernel returned, for one member of the run (NumPy arrays, no copy)."""
    if isinstance(value, NkiTensor):
        return to_host(value)[member]
    if isinstance(value, (tuple, list)):
        return tuple(_to_numpy(v, member) for v in value)
    return value


def _seen(bound, member):
    """The arrays the kernel's arguments hold for one member (tuples/lists kept)."""
    out = []
    for a in bound:
        if isinstance(a, NkiTensor):
            out.append(to_host(a)[member])
        elif isinstance(a, (tuple, list)):
            out.append(type(a)(_seen(a, member)) if isinstance(a, list) else tuple(_seen(a, member)))
        else:
            out.append(a)
    return out


def _bind_args(fn, args, batched=False):
    try:
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
    except (TypeError, ValueError):
        params = []
    out = []
    for i, a in enumerate(args):
        param = params[i] if i < len(params) else None
        name = param.name if param is not None else f"arg{i}"
        ann = param.annotation if param is not None else None
        if isinstance(a, (np.ndarray, tensor.Members)):
            mutable = isinstance(ann, nki_typing.Annotation) and ann.mutable
            shape = a[0].shape if isinstance(a, tensor.Members) else a.shape[1:] if batched else a.shape
            if isinstance(ann, nki_typing.Annotation) and ann.shape is not None and tuple(ann.shape) != shape:
                fail("err_annotation_shape_mismatch",
                     f"shape of `{name}[{', '.join(map(str, shape))}]` does not match the expected shape "
                     f"of [{', '.join(map(str, ann.shape))}]")
            if mutable and isinstance(a, tensor.Members):
                a = np.stack(a)  # a writable copy: the members' own arrays are never written
            out.append(from_numpy(a, name, immutable=not mutable, batched=batched))
        elif isinstance(a, (tuple, list)):
            out.append(_wrap_nested(a, name, batched))
        else:
            out.append(a)
    return out


def _wrap_nested(value, name, batched=False):
    """A tuple/list argument with its NumPy arrays as immutable HBM tensors (a kernel never
    receives a host array)."""
    items = [from_numpy(v, f"{name}_{i}", batched=batched) if isinstance(v, (np.ndarray, tensor.Members))
             else _wrap_nested(v, f"{name}_{i}", batched) if isinstance(v, (tuple, list)) else v
             for i, v in enumerate(value)]
    return type(value)(items) if isinstance(value, list) else tuple(items)


# The emulator's run state (runtime's run stack, tensor owners, uid counters)
# is per process: kernels started from several threads (in-process profiling
# of a for_each batch) run one after another. Re-entrant, so a kernel that
# calls nki.simulate_kernel runs the callee inside its own run.
_RUN_LOCK = threading.RLock()


def _execute(kernel, args, kwargs, target, tracer, compute=True):
    with _RUN_LOCK:
        outputs, _ = _execute_locked(kernel, args, kwargs, target, tracer, compute)
        return outputs[0] if outputs is not None else None


def _execute_locked(kernel, args, kwargs, target, tracer, compute, members=1, trace_member=0, batched=False):
    """Runs the kernel once; returns ([outputs per member], [argument arrays per member])
    or (None, None) for a nested call (whose result is returned as is, see below).
    ``batched``: ``args`` are batched (arrays (S,) + shape or tensor.Members) for
    ``members`` input sets (run_batched, also for one set); else one set's own arrays."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
    install()
    fn = _kernel_function(kernel)
    if runtime.current() is not None:
        # a kernel calling nki.simulate_kernel/baremetal/benchmark: the callee is part of
        # the running kernel (as a nested @nki.jit call is); its tensors stay tensors
        return [fn(*args, **kwargs)], None
    run_state = runtime.Run(target, tracer, compute, batch=members, trace_member=trace_member)
    runtime.push(run_state)
    tensor.forget_owners()
    try:
        with np.errstate(all="ignore"), blas_threads.single_threaded():
            bound = _bind_args(fn, list(args), batched=batched)
            try:
                result = fn(*bound, **kwargs)
                if run_state.error is not None:
                    raise run_state.error  # a refusal the kernel caught still refuses the kernel
                coverage.check_outputs(result, bound)
            except (NKICompileError, UnwrittenOutputError) as exc:
                # the same error for every member unless the members' data diverged first
                exc.uniform = not run_state.data_dependent
                raise
        outputs = [_to_numpy(result, m) for m in range(members)]
        seen = [_seen(bound, m) for m in range(members)]
    finally:
        runtime.pop()
        tensor.forget_owners()
    return outputs, seen


def run(kernel, args, *, target="trn1", trace=True, compute=True, keep_trace=False):
    """Runs ``kernel`` (``@nki.jit`` or plain function) eagerly on ``args``.

    ``args``: NumPy arrays (become immutable shared-HBM tensors, also inside
    tuples/lists; ``nt.mutable_tensor`` parameters are writable) and Python
    scalars; ``target``: "trn1" (default, calibrated) or "trn2" (unvalidated);
    ``trace``: False skips all cost bookkeeping; ``compute``: False is the
    cost-only fast path (matmuls and scans are skipped, outputs are NOT the
    kernel's results; validation still runs); ``keep_trace``: also return the
    instruction records (``result.trace = (records, counters)``) so that
    ``nki_emu.cost.tracer.replay`` can re-estimate them for other targets/knobs.
    Returns RunResult. Raises NKICompileError for kernels neuronxcc refuses,
    UnwrittenOutputError when a returned output is not an HBM tensor every element
    of which a store wrote (nki_emu.coverage); other exceptions propagate.
    """
    tracer = None
    if trace:
        from .cost.tracer import Tracer
        tracer = Tracer(target)
    outputs = _execute(kernel, args, {}, target, tracer, compute)
    profile = tracer.profile() if tracer is not None else {"target": target, "estimated": True}
    result = RunResult(outputs, profile)
    result.trace = (tracer.records, tracer.m) if (tracer is not None and keep_trace) else None
    return result


class NotBatchable(ValueError):
    """The input sets given to :func:`run_batched` cannot share one kernel call: their
    arrays differ in shape or dtype, or their other arguments differ (a Python value can
    steer the kernel's control flow). Run them one by one with :func:`run`."""


class BatchResult:
    """Outcome of :func:`run_batched`.

    ``outputs``: one entry per input set, what the kernel returned for it (an ndarray or
    a tuple of them; views of the batched storage, no copy); ``arguments``: per input
    set, the arrays the kernel's arguments held (the caller's own arrays, or for
    ``nt.mutable_tensor`` parameters the copies the kernel could write); ``profile``:
    the estimated profile of ``trace_member``'s run (as ``RunResult.profile``; only
    ``target``/``estimated`` without tracing); ``trace``: (records, counters) with
    ``keep_trace``, else None; ``timings``: {"run_ms", "replay_ms"} (wall time of the
    kernel call and of the cost model's replay).
    """

    def __init__(self, outputs, arguments, profile, trace, timings):
        self.outputs, self.arguments, self.profile = outputs, arguments, profile
        self.trace, self.timings = trace, timings

    def __repr__(self):
        return f"BatchResult({len(self.outputs)} input sets, latency_ms={self.profile.get('latency_ms')})"


def _stack_argument(position, values):
    """One argument position across the input sets: tensor.Members for arrays (no copy),
    the common value otherwise. Raises NotBatchable."""
    first = values[0]
    if isinstance(first, np.ndarray):
        if not all(isinstance(v, np.ndarray) and v.shape == first.shape and v.dtype == first.dtype for v in values):
            raise NotBatchable(f"argument {position}: arrays of different shapes or dtypes")
        if first.ndim == 0:
            raise NotBatchable(f"argument {position}: a 0-d array (a kernel sees it as shape (1,))")
        return tensor.Members(np.ascontiguousarray(v) for v in values)
    if isinstance(first, (tuple, list)):
        if not all(type(v) is type(first) and len(v) == len(first) for v in values):
            raise NotBatchable(f"argument {position}: sequences of different lengths")
        items = [_stack_argument(f"{position}.{i}", [v[i] for v in values]) for i in range(len(first))]
        return type(first)(items) if isinstance(first, list) else tuple(items)
    for v in values[1:]:
        same = type(v) is type(first) and (v == first if not isinstance(v, float) else
                                           (v == first or (v != v and first != first)))
        if not same:
            raise NotBatchable(f"argument {position}: the input sets' values differ ({first!r}, {v!r})")
    return first


def run_batched(kernel, input_sets, *, target="trn1", trace_member=None, compute=True, keep_trace=False):
    """Runs ``kernel`` once for every input set in ``input_sets`` (docs/nki-emulator.md,
    "Batched execution").

    ``input_sets``: a list of S argument lists as for :func:`run`; their arrays must
    have equal shapes and dtypes per position and their other arguments must be equal
    (else NotBatchable, raised before anything runs). Every storage array of the run
    has a leading axis of S members; each member's results are exactly those of
    ``run(kernel, input_sets[m])``. ``trace_member``: the input set whose run is traced
    by the cost model (its profile is returned; the instruction stream is the same for
    every input set, only indirect-DMA addresses are that member's), or None for no
    tracing. ``compute``/``keep_trace``: as for :func:`run`. The caller's arrays are
    never copied or written (``nt.mutable_tensor`` parameters get writable copies).

    Returns BatchResult. Raises what :func:`run` raises; an NKICompileError or
    UnwrittenOutputError carries ``uniform``: True when it is the same for every
    input set (raised before the members' data made them diverge: an indirect access
    out of bounds for some members only, or indirect stores), so that run(input_sets[0])
    would raise it too; otherwise run the sets one by one to attribute it. Memory:
    S times a single run's storage (except the caller's input arrays).
    """
    import time
    if not input_sets:
        raise ValueError("run_batched needs at least one input set")
    members = len(input_sets)
    if any(len(a) != len(input_sets[0]) for a in input_sets):
        raise NotBatchable("input sets with different numbers of arguments")
    args = [_stack_argument(i, [a[i] for a in input_sets]) for i in range(len(input_sets[0]))]
    tracer = None
    if trace_member is not None:
        if not 0 <= trace_member < members:
            raise ValueError(f"trace_member {trace_member} out of range for {members} input sets")
        from .cost.tracer import Tracer
        tracer = Tracer(target)
    start = time.perf_counter()
    with _RUN_LOCK:
        outputs, seen = _execute_locked(kernel, args, {}, target, tracer, compute, members,
                                        trace_member if trace_member is not None else 0, batched=True)
    ran = time.perf_counter()
    profile = tracer.profile() if tracer is not None else {"target": target, "estimated": True}
    timings = {"run_ms": (ran - start) * 1e3, "replay_ms": (time.perf_counter() - ran) * 1e3}
    trace = (tracer.records, tracer.m) if (tracer is not None and keep_trace) else None
    return BatchResult(outputs, seen, profile, trace, timings)


class JitKernel:
    """``@nki.jit`` result: calling it with NumPy arrays runs the kernel eagerly."""

    def __init__(self, func, mode="auto", **options):
        functools.update_wrapper(self, func)
        self.__nki_function__ = func
        self.mode, self.options = mode, options
        self.last_profile = None

    def __call__(self, *args, **kwargs):
        if runtime.current() is not None:
            return self.__nki_function__(*args, **kwargs)
        target = self.options.get("platform_target", "trn1")
        return _execute(self, args, kwargs, target if target in TARGETS else "trn1", None)


def jit(func=None, mode="auto", **options):
    """``@nki.jit`` / ``@nki.jit(mode=...)`` (nki-facts §2.7)."""
    if func is None:
        return lambda f: JitKernel(f, mode, **options)
    return JitKernel(func, mode, **options)


def baremetal(kernel=None, save_neff_name=None, save_trace_name=None, additional_compile_opt=None,
              platform_target=None, artifacts_dir=None):
    """``nki.baremetal(kernel, save_neff_name=..., save_trace_name=..., additional_compile_opt=...,
    platform_target=...)``: returns a callable that runs the kernel in the emulator (traced),
    keeps the estimated profile in ``.last_profile`` and, as the device would, writes a NEFF
    stand-in to ``save_neff_name`` and an NTFF stand-in carrying the profile to
    ``save_trace_name`` (``nki_emu.profile_files``; ``scripts/neuron-profile`` reads them).

    ``platform_target``: "trn1"/"trn2" (or "gen2"/"gen3"); default
    ``NEURON_PLATFORM_TARGET_OVERRIDE``, else trn1 (``profile_files.target_of``; ValueError
    otherwise). ``additional_compile_opt`` is recorded in the NEFF stand-in. Relative file
    names are placed in ``artifacts_dir`` when given. Raises what :func:`run` raises."""
    if kernel is None:
        return lambda k: baremetal(k, save_neff_name, save_trace_name, additional_compile_opt, platform_target,
                                   artifacts_dir)
    from . import profile_files
    target = profile_files.target_of(platform_target)

    def _place(name):
        return os.path.join(artifacts_dir, name) if (name and artifacts_dir and not os.path.isabs(name)) else name

    def call(*args):
        result = run(kernel, args, target=target)
        call.last_profile = result.profile
        if save_neff_name or save_trace_name:
            profile_files.write(_place(save_neff_name), _place(save_trace_name), result.profile,
                                getattr(_kernel_function(kernel), "__name__", "kernel"), target,
                                additional_compile_opt)
        return result.outputs

    call.last_profile = None
    return call


def simulate_kernel(kernel, *args, **kwargs):
    """``nki.simulate_kernel(kernel, *args)``: NumPy in, NumPy out (no cost tracing)."""
    return _execute(kernel, args, kwargs, "trn1", None)


class _Latency:
    def __init__(self, us):
        self._us = us

    def get_latency_percentile(self, percentile):
        """Estimated latency in microseconds (identical for every percentile)."""
        return self._us


class _BenchmarkResult:
    def __init__(self, us):
        self.nc_latency = _Latency(us)


def benchmark(kernel=None, warmup=10, iters=100, **options):
    """``nki.benchmark``: the decorated kernel runs once in the emulator; its estimated
    latency is exposed as ``.benchmark_result.nc_latency.get_latency_percentile(p)`` (us)."""
    if kernel is None:
        return lambda k: benchmark(k, warmup, iters, **options)

    def call(*args):
        result = run(kernel, args, target=options.get("platform_target", "trn1"))
        call.benchmark_result = _BenchmarkResult(result.profile["latency_ms"] * 1e3)
        return result.outputs

    call.benchmark_result = None
    return call


def profile(kernel=None, working_directory=None, save_neff_name=None, save_trace_name=None, overwrite=False,
            profile_nth=1, additional_compile_opt=None, platform_target=None):
    """``nki.profile``: :func:`baremetal` with its files in ``working_directory``
    (``overwrite``/``profile_nth`` are accepted; every call is profiled)."""
    if kernel is None:
        return lambda k: profile(k, working_directory, save_neff_name, save_trace_name, overwrite, profile_nth,
                                 additional_compile_opt, platform_target)
    return baremetal(kernel, save_neff_name, save_trace_name, additional_compile_opt, platform_target,
                     working_directory)


nki_module = types.ModuleType("neuronxcc.nki")
nki_module.__doc__ = "NKI emulator (nki_emu) standing in for neuronxcc.nki."
nki_module.__path__ = []
for _name, _value in {"jit": jit, "trace": jit, "baremetal": baremetal, "simulate_kernel": simulate_kernel,
                      "benchmark": benchmark, "profile": profile, "language": namespaces.LANGUAGE,
                      "isa": namespaces.ISA, "typing": namespaces.TYPING, "tensor": NkiTensor,
                      "NKICompileError": NKICompileError}.items():
    setattr(nki_module, _name, _value)
