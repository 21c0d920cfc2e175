"""The trusted half of isolated profiling: runs in the host's interpreter.

The host's isolated-call service (host/src/worker/isolated_call.cc) calls

Both steps follow codec's packed convention (``fn(arg, blobs) -> (value,
blobs)``): input and output arrays travel as raw attachments.

1. :func:`prepare` with ``{"module", "function", "arg"}``. For
   ``accelopt.profile.profile_kernel`` it validates the request, applies the
   source rules (precision downgrade, forbidden imports/accesses), draws the
   inputs of every seed plus one hidden input set from a secret random seed
   (accelopt.sandbox.draws), starts computing their reference outputs on a
   background thread (they are ready, or nearly, when the worker answers) and
   returns either a final ``result`` (the kernel never runs) or a ``token``
   and the ``worker`` request for :func:`accelopt.sandbox.untrusted.run_kernel`.
   Any other function is ``{"plain": True}``: run as is in a worker.
2. :func:`finish` with the token and the worker's outcome; it judges the
   outputs and returns ``profile_kernel``'s result (docs/architecture.md),
   with the isolation error kinds of docs/isolation.md added, and
   ``timings`` (where the call's time went, ms).
3. :func:`discard` if the call is abandoned between the two.
"""
import secrets
import threading
import time

import numpy as np

from .. import compare, loading, precision, profile
from .. import result as R
from ..backends import choose_backend
from ..backends.neuron import MAX_RETRIES, PERF_TOL
from . import codec, draw_cache, draws, static_check

PROFILE_CALL = ("accelopt.profile", "profile_kernel")
# One trial of a FlashInfer-Bench solution or reference (accelopt.fib.trusted; docs/flashinfer.md).
FIB_TRIAL_CALL = ("accelopt.fib.evaluate", "trial")

# Error kinds added by isolated evaluation (documented in docs/isolation.md).
TIMEOUT = "timeout"
OUT_OF_MEMORY = "out_of_memory"
CRASH = "crash"
SANDBOX_VIOLATION = "sandbox_violation"
WORKER_ERROR = "worker_error"
FORBIDDEN_IMPORT = static_check.FORBIDDEN_IMPORT
FORBIDDEN_ACCESS = static_check.FORBIDDEN_ACCESS
OUTPUT_ALIASES_INPUT = "output_aliases_input"
INPUT_MUTATED = "input_mutated"
STALE_OUTPUT = "stale_output"

ISOLATION_ERROR_KINDS = (TIMEOUT, OUT_OF_MEMORY, CRASH, SANDBOX_VIOLATION, WORKER_ERROR, FORBIDDEN_IMPORT,
                         FORBIDDEN_ACCESS, OUTPUT_ALIASES_INPUT, INPUT_MUTATED, STALE_OUTPUT)

# Published seeds' draws (draws.Draw), shared by every candidate of a problem.
DRAWS = draw_cache.DrawCache()
# Hidden input sets drawn ahead for references profiled repeatedly.
HIDDEN = draws.HiddenSpares()

_states = {}
_states_lock = threading.Lock()


class _Early(Exception):
    def __init__(self, kind, message, tb=""):
        super().__init__(message)
        self.kind, self.message, self.tb = kind, message, tb


def _ms(start):
    return (time.perf_counter() - start) * 1e3


def _cached_draw(reference, reference_key, seed):
    """The Draw of a published seed, drawn once per (reference source, seed) and kept
    (draw_cache); its reference outputs are started on the background thread."""
    key = (reference_key, seed)
    hit = [True]

    def compute():
        hit[0] = False
        return draws.draw(reference, seed)

    found = DRAWS.get(key, compute)
    found.start(reference, on_done=lambda d: DRAWS.resize(key, d.nbytes))
    return found, hit[0]


def _prepare_profile(request, options, blobs):
    started = time.perf_counter()
    kernel_path, reference_path, backend_name, target, rel_tol, seeds, timing = profile._request_fields(request)
    resolved = choose_backend(backend_name)["backend"]
    timings = {}
    start = time.perf_counter()
    reference = loading.load_reference(reference_path)
    try:
        with open(kernel_path, encoding="utf-8", errors="replace") as handle:
            source = handle.read()
    except OSError as exc:
        raise R.HarnessError(R.COMPILE_ERROR, f"cannot read kernel {kernel_path}: {exc}") from exc
    timings["load_ms"] = _ms(start)
    start = time.perf_counter()
    if precision.uses_float16(source):
        raise R.HarnessError(R.PRECISION_DOWNGRADE,
                             f"{kernel_path}: 'float16' (or bfloat16) is used in the kernel; only float32 is allowed")
    if options.get("static_checks", True):
        violation = static_check.first_violation(source, kernel_path)
        if violation is not None:
            raise _Early(violation.kind, f"{kernel_path}:{violation.line}: {violation.message}")
    timings["validate_ms"] = _ms(start)
    start = time.perf_counter()
    try:
        reference_key = draw_cache.source_key(reference_path)
    except OSError as exc:
        raise R.HarnessError(R.REFERENCE_ERROR, f"cannot read reference {reference_path}: {exc}") from exc
    published = [_cached_draw(reference, reference_key, seed) for seed in seeds]
    seed_draws = [d for d, _ in published]
    # Never cached: fresh for every call (a spare drawn ahead serves one call only).
    hidden_draw, spare = HIDDEN.take(reference, reference_key, set(seeds))
    timings.update(draw_ms=_ms(start), cached_draws=sum(hit for _, hit in published), hidden_drawn_ahead=spare)
    # The hidden run goes at a random place among the seeds' runs.
    start = time.perf_counter()
    order = list(range(len(seeds)))
    hidden_index = secrets.randbelow(len(seeds) + 1)
    order.insert(hidden_index, -1)
    runs = []
    for slot in order:
        nki_inputs = seed_draws[slot].nki_inputs if slot >= 0 else hidden_draw.nki_inputs
        try:
            runs.append([codec.encode(a, blobs) for a in nki_inputs])
        except codec.CodecError as exc:
            raise R.HarnessError(R.REFERENCE_ERROR, f"reference inputs cannot be sent to a worker: {exc}") from exc
    timings["encode_ms"] = _ms(start)
    # Latency comes from the hidden run: inputs no cache or replay table can hold.
    timed_run = hidden_index if timing else -1
    state = {"request": request, "reference": reference, "seeds": seeds, "rel_tol": rel_tol, "order": order,
             "draws": seed_draws, "hidden": hidden_draw, "hidden_seed": hidden_draw.seed,
             "backend": resolved, "target": target, "timing": timing, "kernel_path": kernel_path,
             "reference_key": reference_key, "timings": timings, "started": started}
    worker_arg = {"kernel_source": source, "kernel_path": kernel_path, "backend": resolved, "target": target,
                  "runs": runs, "timed_run": timed_run, "external_profiler": resolved == "neuron"}
    state["device_rounds"] = []
    state["worker_arg"] = worker_arg
    timings["prepare_ms"] = _ms(started)
    return state, worker_arg


@codec.packed
def prepare(call, _blobs=()):
    """First step of an isolated call; see the module docstring.

    ``call``: {"module", "function", "arg", "options"?: {"static_checks": bool}}.
    Returns ``(prepared, blobs)``: prepared is {"plain": True} | {"result":
    <profile result>} | {"token": str, "worker": {"module", "function",
    "arg"}}, and blobs the attachments of the worker's arg (the inputs of
    every run). Never raises for a bad request or reference (they become a
    result with an error).
    """
    blobs = []
    if (call.get("module"), call.get("function")) == FIB_TRIAL_CALL:
        from ..fib import trusted as fib_trusted
        return fib_trusted.prepare_trial(call.get("arg") or {})
    if (call.get("module"), call.get("function")) != PROFILE_CALL:
        return {"plain": True}, []
    request = call.get("arg")
    backend = request.get("backend", "auto") if isinstance(request, dict) else "auto"
    target = request.get("target", "trn1") if isinstance(request, dict) else "trn1"
    result = R.new_result(backend, target)
    try:
        R.set_backend(result, choose_backend(backend))
        state, worker_arg = _prepare_profile(request, call.get("options") or {}, blobs)
    except R.HarnessError as exc:
        return {"result": R.set_error(result, exc.kind, exc.message, exc.tb)}, []
    except _Early as exc:
        return {"result": R.set_error(result, exc.kind, exc.message, exc.tb)}, []
    except Exception as exc:  # noqa: BLE001 - a malformed request, as profile_kernel reports it
        return {"result": R.set_error(result, R.RUNTIME_ERROR, f"{type(exc).__name__}: {exc}",
                                      R.format_exception(exc))}, []
    state["result"] = result
    token = secrets.token_hex(12)
    state["sent_at"] = time.perf_counter()
    with _states_lock:
        _states[token] = state
    return {"token": token, "backend": state["backend"],
            "worker": {"module": "accelopt.sandbox.untrusted", "function": "run_kernel", "arg": worker_arg}}, blobs


def discard(call):
    """Forgets a prepared call: ``{"token"}``. Returns True if it existed."""
    if str(call.get("token", "")).startswith("fib-"):
        from ..fib import trusted as fib_trusted
        return fib_trusted.discard(call["token"])
    with _states_lock:
        return _states.pop(call.get("token"), None) is not None


def settle(_call=None):
    """Waits for the background work prepared calls started (reference outputs, hidden
    sets drawn ahead); returns None. For benchmarks that time the workers alone."""
    draws.settle()


def pending(_call=None):
    """Number of prepared calls not yet finished or discarded (for tests)."""
    with _states_lock:
        return len(_states)


def _equal_outputs(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype or not np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"):
            return False
    return True


def _draw_of(state, slot):
    return state["draws"][slot] if slot >= 0 else state["hidden"]


def _judge_run(state, slot, record, others):
    """Checks one run; returns the rel error (float). Raises _Early / HarnessError."""
    label = f"seed {state['seeds'][slot]}" if slot >= 0 else "a hidden input set"
    drawn = _draw_of(state, slot)
    expected = drawn.expected()
    if record.get("aliasing"):
        raise _Early(OUTPUT_ALIASES_INPUT, f"{record['aliasing']} ({label}): kernels must write fresh outputs")
    outs = record["decoded"]
    refs = compare.as_tuple(expected)
    seed_for_messages = state["seeds"][slot] if slot >= 0 else "hidden"
    compare.check_count(outs, refs, seed_for_messages)
    try:
        # As returned by the kernel: one array, or a tuple (AccelOpt's
        # convention; some references wrap a single array themselves).
        returned = outs[0] if len(outs) == 1 else outs
        shaped = state["reference"].transform_nki_outputs(returned, expected)
    except Exception as exc:  # noqa: BLE001 - as in profile_kernel
        raise R.HarnessError(R.SHAPE_MISMATCH, f"kernel outputs do not fit the reference shapes ({label}): "
                                               f"{type(exc).__name__}: {exc}", R.format_exception(exc)) from exc
    try:
        return compare.compare_outputs(compare.as_tuple(shaped), refs, state["rel_tol"], seed_for_messages,
                                       drawn.norms()), outs
    except R.HarnessError as exc:
        if exc.kind == R.WRONG_RESULT:
            for other_slot, other in others:
                other_expected = _draw_of(state, other_slot).expected()
                if _equal_outputs(outs, other) and not _equal_outputs(compare.as_tuple(expected),
                                                                       compare.as_tuple(other_expected)):
                    raise _Early(STALE_OUTPUT, f"the output for {label} is identical to another run's output on "
                                               "different inputs (cached or replayed result)") from exc
            if slot < 0:
                raise _Early(STALE_OUTPUT, "the kernel passes the published seeds but is wrong on a hidden input "
                                           f"set (cached, replayed or seed-specific result): {exc.message}") from exc
        raise


def _wait_for_references(state):
    """Waits for every reference output of the call (computed in the background since
    prepare); records how long the judge waited. Raises HarnessError(reference_error)."""
    start = time.perf_counter()
    for drawn in state["draws"] + [state["hidden"]]:
        drawn.expected(state["reference"])
    state["timings"]["reference_wait_ms"] = _ms(start)
    state["timings"]["reference_ms"] = sum(d.reference_ms or 0.0 for d in state["draws"] + [state["hidden"]])


def _worker_timings(state, worker):
    """Adds the worker's own timings (untrusted.run_kernel) and the transfer time (the
    worker round trip minus the worker's measured work) to the call's timings."""
    timings = state["timings"]
    theirs = worker.get("timings") if isinstance(worker.get("timings"), dict) else {}
    round_trip = (state["returned_at"] - state["sent_at"]) * 1e3
    own = 0.0
    for key in ("load_ms", "decode_ms", "run_ms", "trace_replay_ms", "encode_ms"):
        value = theirs.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            timings["worker_" + key if key in ("load_ms", "decode_ms", "encode_ms") else key] = float(value)
            own += float(value)
    timings["worker_round_trip_ms"] = round_trip
    timings["transfer_ms"] = max(0.0, round_trip - own)
    for key in ("batched", "fallback", "passes", "memory_cap_mb", "member_mb"):
        if key in theirs:
            timings[key] = theirs[key]
    if isinstance(theirs.get("peak_rss_bytes"), int):
        timings["worker_peak_rss_mb"] = theirs["peak_rss_bytes"] / 2**20


def _finish_profile(state, outcome, blobs, result):
    _wait_for_references(state)  # a reference that fails is reported first, as before the kernel ran
    if not outcome.get("ok"):
        error = outcome.get("error") or {}
        raise _Early(error.get("kind", WORKER_ERROR), error.get("message", "the worker failed"),
                     error.get("traceback", ""))
    if outcome.get("integrity"):
        changes = outcome["integrity"]
        raise _Early(FORBIDDEN_ACCESS, "the kernel modified the worker's libraries: " + "; ".join(changes[:5]))
    worker = outcome.get("result") or {}
    _worker_timings(state, worker)
    judge_start = time.perf_counter()
    try:
        _judge_worker(state, worker, blobs, result)
    finally:
        state["timings"]["judge_ms"] = _ms(judge_start)


def _judge_worker(state, worker, blobs, result):
    result["compiled"] = bool(worker.get("compiled"))
    records = worker.get("runs") or []
    # Judge the seeds' runs in seed order, then the hidden run (whatever order they ran in).
    positions = sorted(range(len(records)), key=lambda p: (state["order"][p] < 0, state["order"][p]))
    for record in records:
        if not record.get("aliasing"):
            try:
                record["decoded"] = tuple(codec.decode(o, blobs, copy=False) for o in record.get("outputs", []))
            except codec.CodecError as exc:
                raise _Early(WORKER_ERROR, f"malformed outputs from the worker: {exc}") from exc
    for position in positions:
        record = records[position]
        slot = state["order"][position]
        others = [(state["order"][p], records[p]["decoded"]) for p in range(len(records))
                  if p != position and "decoded" in records[p]]
        # A digest of None: the worker held that input read-only (it cannot have changed);
        # the host's own digest is computed only for inputs the worker reports one for.
        drawn = _draw_of(state, slot)
        changed = [i for i, b in enumerate(record.get("input_digests", [])[:len(drawn.nki_inputs)])
                   if b is not None and drawn.digest(i) and drawn.digest(i) != b]
        if changed:
            raise _Early(INPUT_MUTATED, f"the kernel modified input {changed[0]} "
                                        f"({'seed ' + str(state['seeds'][slot]) if slot >= 0 else 'hidden input set'})")
        try:
            rel, _ = _judge_run(state, slot, record, others)
        except R.HarnessError as exc:
            if slot >= 0 and getattr(exc, "rel_error", None) is not None:
                result["rel_errors"].append(exc.rel_error)
            raise
        if slot >= 0:
            result["rel_errors"].append(rel)
    if worker.get("error"):
        error = worker["error"]
        raise _Early(error.get("kind", R.RUNTIME_ERROR), error.get("message", ""), error.get("traceback", ""))
    if len(records) != len(state["order"]):
        raise _Early(WORKER_ERROR, f"the worker returned {len(records)} of {len(state['order'])} runs")
    result["correct"] = True
    if state["timing"] and state["backend"] == "neuron":
        _device_timing(state, worker, result)
    elif state["timing"]:
        if worker.get("timing_error") or worker.get("latency_ms") is None:
            raise R.HarnessError(R.TIMING_ERROR, worker.get("timing_error") or "the worker measured no latency")
        result["latency_ms"] = float(worker["latency_ms"])
        result["metrics"] = worker.get("metrics") or {}


# Pause between timing rounds on hardware, in s (AccelOpt waits 1 s before re-measuring).
REMEASURE_PAUSE_S = 1.0


class _Remeasure(Exception):
    """The device's timing round was unsteady: the host must run another one (worker job + blobs)."""

    def __init__(self, job, blobs):
        super().__init__("remeasure")
        self.job, self.blobs = job, blobs


def _device_timing(state, worker, result):
    """Latency from the host-side profiles of the hardware's timed runs (AccelOpt's protocol).

    ``worker["device_profile"]`` is accelopt.backends.device_profile's
    answer, added by the host while it held the worker. A round whose
    (max-min)/min exceeds PERF_TOL is re-measured up to MAX_RETRIES times
    (raises _Remeasure); the steadiest round is kept. Raises HarnessError
    (timing_error) when the profiles are missing or the profiler failed.
    """
    if worker.get("timing_error"):
        raise R.HarnessError(R.TIMING_ERROR, worker["timing_error"])
    profile_out = worker.get("device_profile")
    if not isinstance(profile_out, dict):
        raise R.HarnessError(R.TIMING_ERROR, "the worker left no profile files for the host "
                                             "(device_artifacts missing)")
    if profile_out.get("error") or not profile_out.get("stats"):
        raise R.HarnessError(R.TIMING_ERROR, "profiling on the host failed: " + str(profile_out.get("error")))
    rounds = state["device_rounds"]
    rounds.append(profile_out)
    if profile_out["stats"]["rel_diffs"] > PERF_TOL and len(rounds) <= MAX_RETRIES:
        time.sleep(REMEASURE_PAUSE_S)
        blobs = []
        arg = {"kernel_source": state["worker_arg"]["kernel_source"], "kernel_path": state["kernel_path"],
               "backend": "neuron", "target": state["target"], "external_profiler": True,
               "runs": [[codec.encode(a, blobs) for a in state["hidden"].nki_inputs]], "timed_run": 0}
        raise _Remeasure({"module": "accelopt.sandbox.untrusted", "function": "run_kernel", "arg": arg}, blobs)
    best = min(rounds, key=lambda r: r["stats"]["rel_diffs"])
    result["latency_ms"] = float(best["stats"]["latency_ms"])
    metrics = dict(best.get("metrics") or {})
    metrics.update({k: best["stats"][k] for k in ("min_ms", "max_ms", "rel_diffs")})
    metrics.update(rounds=len(rounds), samples_ms=list(best["samples_ms"]))
    result["metrics"] = metrics


def _finish_remeasure(state, outcome, result):
    """Takes another timing round's outcome (the kernel was judged already)."""
    if not outcome.get("ok"):
        error = outcome.get("error") or {}
        raise R.HarnessError(R.TIMING_ERROR, "re-measuring failed: " + str(error.get("message", error.get("kind"))))
    if outcome.get("integrity"):
        raise _Early(FORBIDDEN_ACCESS, "the kernel modified the worker's libraries: "
                     + "; ".join(outcome["integrity"][:5]))
    worker = outcome.get("result") or {}
    if worker.get("error"):
        error = worker["error"]
        raise _Early(error.get("kind", R.RUNTIME_ERROR), "while re-measuring: " + error.get("message", ""),
                     error.get("traceback", ""))
    _device_timing(state, worker, result)


@codec.packed
def finish(call, blobs=()):
    """Judges a worker's outcome for a prepared call.

    ``call``: {"token", "outcome": {"ok": true, "result": <run_kernel's
    result>, "integrity": [...]} | {"ok": false, "error": {"kind",
    "message"}}}; ``blobs``: the worker reply's attachments (the outputs).

    Returns ``(profile result, [])``, or on hardware, when a timing round
    was unsteady, ``({"remeasure": True, "token", "backend", "worker":
    job}, job blobs)``: the host runs the job in a worker and calls finish
    again with the same token (docs/trainium.md). Never raises (an unknown
    token is a worker_error result).
    """
    token = call.get("token")
    if str(token or "").startswith("fib-"):
        from ..fib import trusted as fib_trusted
        return fib_trusted.finish_trial(token, call.get("outcome") or {}, blobs), []
    with _states_lock:
        state = _states.get(token)
    if state is None:
        result = R.new_result("unknown", "unknown")
        return R.set_error(result, WORKER_ERROR, "unknown or expired isolated-call token"), []
    result = state["result"]
    state["returned_at"] = time.perf_counter()
    try:
        if state["device_rounds"] and state.get("remeasuring"):
            _finish_remeasure(state, call.get("outcome") or {}, result)
        else:
            _finish_profile(state, call.get("outcome") or {}, blobs, result)
    except _Remeasure as again:
        state["remeasuring"] = True
        return {"remeasure": True, "token": token, "backend": state["backend"], "worker": again.job}, again.blobs
    except (R.HarnessError, _Early) as exc:
        R.set_error(result, exc.kind, exc.message, exc.tb)
    except Exception as exc:  # noqa: BLE001 - a malformed worker answer
        R.set_error(result, WORKER_ERROR, f"cannot judge the worker's answer: {type(exc).__name__}: {exc}",
                    R.format_exception(exc))
    with _states_lock:
        _states.pop(token, None)
    if result["error"] is not None:
        result["correct"] = result["correct"] and result["error"]["kind"] == R.TIMING_ERROR
        if result["error"]["kind"] != R.TIMING_ERROR:
            result["latency_ms"] = None
    state["timings"]["total_ms"] = _ms(state["started"])
    result["timings"] = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in state["timings"].items()}
    return result, []


def run_unisolated(request):
    """The split harness with no isolation: prepare, run_kernel and finish in this process.

    Same work and result as an isolated call minus the worker (benchmarks use
    it as the baseline; never use it for untrusted kernels). ``request`` as
    for profile_kernel. Returns the profile result.
    """
    from . import untrusted

    prepared, blobs = prepare({"module": PROFILE_CALL[0], "function": PROFILE_CALL[1], "arg": request})
    if "result" in prepared:
        return prepared["result"]
    import json as _json

    # What crossing the pipe costs besides the transfer: JSON text and one copy of every buffer.
    job = _json.loads(_json.dumps(prepared["worker"]["arg"]))
    out_blobs = []
    try:
        value, out_blobs = untrusted.run_kernel(job, [bytes(b) for b in blobs])
        outcome = {"ok": True, "result": _json.loads(_json.dumps(value)), "integrity": []}
    except Exception as exc:  # noqa: BLE001 - reported like a worker failure
        outcome = {"ok": False, "error": {"kind": WORKER_ERROR, "message": f"{type(exc).__name__}: {exc}"}}
    return finish({"token": prepared["token"], "outcome": outcome}, [bytes(b) for b in out_blobs])[0]
