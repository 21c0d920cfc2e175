"""``profile_kernel``: correctness over seeds, then latency (docs/architecture.md).

Semantics follow AccelOpt's ``NKIKernel.profile`` (accelopt-facts §2.2/§2.3)
with its defects fixed: compile, runtime, shape, NaN/Inf, tolerance,
precision, reference and timing failures are separate error kinds; profiling
metrics come from the timed run; nothing raises out of ``profile_kernel``.
"""
import os
import time

import numpy as np

from . import compare, loading, precision
from . import result as R
from .backends import TARGETS, choose_backend, make_backend

DEFAULT_SEEDS = (0, 21, 42, 63, 84)
DEFAULT_REL_TOL = 2e-5

_CAUGHT = (Exception, SystemExit)  # never swallow host timeouts (BaseException subclasses)


def _request_fields(request):
    if not isinstance(request, dict):
        raise ValueError("request must be a JSON object")
    for key in ("kernel", "reference"):
        if not isinstance(request.get(key), str) or not request[key]:
            raise ValueError(f"request.{key} must be a file path")
    backend = request.get("backend", "auto")
    target = request.get("target", "trn1")
    if target not in TARGETS:
        raise ValueError(f"request.target must be one of {TARGETS}, got {target!r}")
    rel_tol = request.get("rel_tol", DEFAULT_REL_TOL)
    if isinstance(rel_tol, bool) or not isinstance(rel_tol, (int, float)) or not rel_tol > 0:
        raise ValueError(f"request.rel_tol must be a positive number, got {rel_tol!r}")
    if request.get("hidden_only"):
        raise ValueError("request.hidden_only needs worker isolation (the trusted side of an isolated call draws "
                         "the hidden input set)")
    seeds = request.get("seeds", list(DEFAULT_SEEDS))
    if not isinstance(seeds, list) or not seeds or not all(
            isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**32 for s in seeds):
        raise ValueError("request.seeds must be a non-empty list of integers in [0, 2^32)")
    timing = request.get("timing", True)
    if not isinstance(timing, bool):
        raise ValueError("request.timing must be a boolean")
    return request["kernel"], request["reference"], backend, target, float(rel_tol), seeds, timing


def _located(kind, exc, kernel_path):
    """Returns a HarnessError of ``kind`` for ``exc``, its message led by the kernel's file:line."""
    where = loading.kernel_location(exc, kernel_path)
    text = str(exc)
    # NKICompileError's text already starts with "<file>:<line>: error: ..."
    already = where is not None and os.path.basename(kernel_path) in text \
        and f":{where.rsplit(':', 1)[1]}:" in text
    prefix = f"{where}: " if where and not already else ""
    return R.HarnessError(kind, f"{prefix}{type(exc).__name__}: {text}", R.format_exception(exc))


def _reference_call(what, fn, *args):
    try:
        return fn(*args)
    except _CAUGHT as exc:
        raise R.HarnessError(R.REFERENCE_ERROR, f"reference {what} failed: {type(exc).__name__}: {exc}",
                             R.format_exception(exc)) from exc


def _add_ms(timings, key, start):
    """Adds the milliseconds since ``start`` (perf_counter) to ``timings[key]``; returns now."""
    now = time.perf_counter()
    timings[key] = timings.get(key, 0.0) + (now - start) * 1e3
    return now


def _run_seed(backend, kernel, kernel_path, reference, seed, rel_tol, result, profiled):
    """Runs one seed; returns (rel_error, nki_inputs). Raises HarnessError."""
    timings = result["timings"]
    start = time.perf_counter()
    np.random.seed(seed)
    inputs = _reference_call("get_inputs()", reference.get_inputs)
    nki_inputs = _reference_call("transform_to_nki_inputs()", reference.transform_to_nki_inputs, inputs)
    result["input_shapes"] = result["input_shapes"] or R.input_shapes(nki_inputs)
    start = _add_ms(timings, "draw_ms", start)
    expected = _reference_call("forward()", reference.forward, *inputs)
    refs = compare.as_tuple(expected)
    compare.check_reference_outputs(refs)
    start = _add_ms(timings, "reference_ms", start)
    try:
        raw = backend.run(kernel, nki_inputs, profiled=profiled)
    except _CAUGHT as exc:
        kind = backend.error_kind(exc) or R.RUNTIME_ERROR
        raise _located(kind, exc, kernel_path) from exc
    finally:
        start = _add_ms(timings, "run_ms", start)
    result["compiled"] = True
    outs = compare.as_tuple(raw)
    compare.check_count(outs, refs, seed)
    try:
        # AccelOpt passes the kernel's result as returned (an array, or a
        # tuple for several outputs); some references wrap it themselves.
        shaped = reference.transform_nki_outputs(raw, expected)
    except _CAUGHT as exc:
        raise R.HarnessError(R.SHAPE_MISMATCH,
                             f"kernel outputs do not fit the reference shapes "
                             f"(seed {seed}): {type(exc).__name__}: {exc}",
                             R.format_exception(exc)) from exc
    try:
        return compare.compare_outputs(compare.as_tuple(shaped), refs, rel_tol, seed), nki_inputs
    finally:
        _add_ms(timings, "judge_ms", start)


def _profile(request, result):
    kernel_path, reference_path, backend_name, target, rel_tol, seeds, timing = _request_fields(request)
    choice = choose_backend(backend_name)
    R.set_backend(result, choice)
    result["target"] = target
    backend = make_backend(choice["backend"], target)
    backend.prepare()
    start = time.perf_counter()
    reference = loading.load_reference(reference_path)
    # The float16 rule runs on the text before anything of the kernel executes.
    try:
        with open(kernel_path, encoding="utf-8", errors="replace") as handle:
            source = handle.read()
    except OSError as exc:
        raise R.HarnessError(R.COMPILE_ERROR, f"cannot read kernel {kernel_path}: {exc}") from exc
    start = _add_ms(result["timings"], "load_ms", start)
    if precision.uses_float16(source):
        raise R.HarnessError(R.PRECISION_DOWNGRADE,
                             f"{kernel_path}: 'float16' (or bfloat16) is used in the kernel; "
                             "only float32 is allowed")
    start = _add_ms(result["timings"], "validate_ms", start)
    kernel = loading.load_kernel(kernel_path)
    _add_ms(result["timings"], "load_ms", start)
    last_inputs = None
    for index, seed in enumerate(seeds):
        profiled = timing and index == len(seeds) - 1  # latency comes from the last seed's run
        try:
            with np.errstate(all="ignore"):  # exp overflow to inf is legitimate (swiglu)
                rel, last_inputs = _run_seed(backend, kernel, kernel_path, reference, seed, rel_tol,
                                             result, profiled)
        except R.HarnessError as exc:
            if getattr(exc, "rel_error", None) is not None:
                result["rel_errors"].append(exc.rel_error)
            raise
        result["rel_errors"].append(rel)
    result["correct"] = True
    if not timing:
        return
    start = time.perf_counter()
    try:
        latency, metrics = backend.measure(kernel, last_inputs)
    except _CAUGHT as exc:
        raise R.HarnessError(R.TIMING_ERROR, f"timing failed: {type(exc).__name__}: {exc}",
                             R.format_exception(exc)) from exc
    finally:
        _add_ms(result["timings"], "trace_replay_ms", start)
    result["latency_ms"] = float(latency)
    result["metrics"] = metrics


def profile_kernel(request):
    """Checks a kernel against its NumPy reference over seeds, then times it.

    ``request`` (dict): ``kernel`` (path to a .py defining ``kernel`` or
    ``optimized_kernel``), ``reference`` (path to a NKIBench reference
    module), ``backend`` ("auto"|"emulator"|"neuron", default "auto"),
    ``target`` ("trn1"|"trn2", default "trn1"), ``rel_tol`` (float, default
    2e-5), ``seeds`` (list of int, default [0, 21, 42, 63, 84]), ``timing``
    (bool, default True).

    Returns a dict: ``compiled``, ``correct`` (bool), ``latency_ms`` (float ms
    or None), ``estimated`` (bool; True for the emulator's cost model),
    ``backend``, ``target`` (str), ``metrics`` (dict of profile fields),
    ``rel_errors`` (list of float, one per seed checked, including a failing
    seed's error), ``error`` (None or {"kind", "message", "traceback"} with
    kind in result.ERROR_KINDS), ``timings`` (where the time went, ms:
    ``load_ms``, ``validate_ms``, ``draw_ms``, ``reference_ms``, ``run_ms``
    (traced runs include their cost-model replay), ``trace_replay_ms``,
    ``judge_ms``, ``total_ms``; an isolated call adds the worker's and the
    transfer's, docs/isolation.md). A kernel rejected by the float16 rule is
    not compiled (``compiled`` False). A request that is malformed is
    reported as ``runtime_error``. Never raises (except BaseException
    subclasses such as host-injected timeouts).
    """
    backend = request.get("backend", "auto") if isinstance(request, dict) else "auto"
    target = request.get("target", "trn1") if isinstance(request, dict) else "trn1"
    result = R.new_result(backend, target)
    started = time.perf_counter()
    try:
        _profile(request, result)
    except R.HarnessError as exc:
        R.set_error(result, exc.kind, exc.message, exc.tb)
    except _CAUGHT as exc:  # noqa: BLE001 - bad request, missing emulator, harness bug
        R.set_error(result, R.RUNTIME_ERROR, f"{type(exc).__name__}: {exc}", R.format_exception(exc))
    if result["error"] is not None:
        result["correct"] = result["correct"] and result["error"]["kind"] == R.TIMING_ERROR
    _add_ms(result["timings"], "total_ms", started)
    result["timings"] = {k: round(v, 3) for k, v in result["timings"].items()}
    return result
