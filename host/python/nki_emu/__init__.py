"""NKI emulator: the legacy ``neuronxcc.nki`` API (NKI "Beta 1", SDK <= 2.27) on NumPy.

Public API (stable contract, docs/architecture.md "NKI emulator"):

* :func:`install` registers ``neuronxcc``/``nki`` module aliases (idempotent).
* :func:`run` executes a kernel on NumPy arrays and returns a :class:`RunResult`
  with the outputs and an estimated Trainium profile (nki-facts §3).
* :func:`jit`, :func:`baremetal`, :func:`simulate_kernel`, :func:`benchmark`
  mirror the ``nki`` entry points (nki-facts §2.7).

Refusals raise :class:`nki_emu.errors.NKICompileError`. "nki-facts §N" in this
package cites docs/nki-facts.md (the NKI and Trainium facts, with their public sources).
"""
import functools
import inspect
import threading
import types

import numpy as np

from . import blas_threads, coverage, isa, language, namespaces, runtime, tensor  # noqa: F401 - isa, language: loaded with the package
from . import typing as nki_typing
from .aliases import install as _install_aliases
from .errors import NKICompileError, UnwrittenOutputError, fail
from .tensor import NkiTensor, from_numpy, to_host

__all__ = ["install", "run", "RunResult", "jit", "baremetal", "simulate_kernel", "benchmark",
           "NKICompileError", "UnwrittenOutputError"]

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


def _to_numpy(value):
    if isinstance(value, NkiTensor):
        return to_host(value)
    if isinstance(value, (tuple, list)):
        return tuple(_to_numpy(v) for v in value)
    return value


def _bind_args(fn, args):
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
        if isinstance(a, np.ndarray):
            mutable = isinstance(ann, nki_typing.Annotation) and ann.mutable
            if isinstance(ann, nki_typing.Annotation) and ann.shape is not None and tuple(ann.shape) != a.shape:
                fail("err_annotation_shape_mismatch",
                     f"shape of `{name}[{', '.join(map(str, a.shape))}]` does not match the expected shape "
                     f"of [{', '.join(map(str, ann.shape))}]")
            out.append(from_numpy(a if not mutable else a, name, immutable=not mutable))
        elif isinstance(a, (tuple, list)):
            out.append(_wrap_nested(a, name))
        else:
            out.append(a)
    return out


def _wrap_nested(value, name):
    """A tuple/list argument with its NumPy arrays as immutable HBM tensors (a kernel never
    receives a host array)."""
    items = [from_numpy(v, f"{name}_{i}") if isinstance(v, np.ndarray)
             else _wrap_nested(v, f"{name}_{i}") if isinstance(v, (tuple, list)) else v
             for i, v in enumerate(value)]
    return type(value)(items) if isinstance(value, list) else tuple(items)


# The emulator's run state (runtime's run stack, tensor owners, uid counters)
# is per process: kernels started from several threads (in-process profiling
# of a for_each batch) run one after another. Re-entrant, so a kernel that
# calls nki.simulate_kernel runs the callee inside its own run.
_RUN_LOCK = threading.RLock()


def _execute(kernel, args, kwargs, target, tracer, compute=True):
    with _RUN_LOCK:
        return _execute_locked(kernel, args, kwargs, target, tracer, compute)


def _execute_locked(kernel, args, kwargs, target, tracer, compute):
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
    install()
    fn = _kernel_function(kernel)
    if runtime.current() is not None:
        # a kernel calling nki.simulate_kernel/baremetal/benchmark: the callee is part of
        # the running kernel (as a nested @nki.jit call is); its tensors stay tensors
        return fn(*args, **kwargs)
    run_state = runtime.Run(target, tracer, compute)
    runtime.push(run_state)
    tensor.forget_owners()
    try:
        with np.errstate(all="ignore"), blas_threads.single_threaded():
            bound = _bind_args(fn, list(args))
            result = fn(*bound, **kwargs)
        if run_state.error is not None:
            raise run_state.error  # a refusal the kernel caught still refuses the kernel
        coverage.check_outputs(result, bound)
    finally:
        runtime.pop()
        tensor.forget_owners()
    return _to_numpy(result)


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


def baremetal(kernel=None, **options):
    """``nki.baremetal(kernel, save_neff_name=..., ...)``: returns a callable that runs the
    kernel in the emulator and keeps the estimated profile in ``.last_profile``."""
    if kernel is None:
        return lambda k: baremetal(k, **options)
    target = options.get("platform_target", "trn1")

    def call(*args):
        result = run(kernel, args, target=target if target in TARGETS else "trn1")
        call.last_profile = result.profile
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


def profile(kernel=None, **options):
    """``nki.profile``: same as :func:`baremetal` in the emulator."""
    return baremetal(kernel, **options)


nki_module = types.ModuleType("neuronxcc.nki")
nki_module.__doc__ = "NKI emulator (nki_emu) standing in for neuronxcc.nki."
nki_module.__path__ = []
for _name, _value in {"jit": jit, "trace": jit, "baremetal": baremetal, "simulate_kernel": simulate_kernel,
                      "benchmark": benchmark, "profile": profile, "language": namespaces.LANGUAGE,
                      "isa": namespaces.ISA, "typing": namespaces.TYPING, "tensor": NkiTensor,
                      "NKICompileError": NKICompileError}.items():
    setattr(nki_module, _name, _value)
