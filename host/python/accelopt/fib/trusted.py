"""The trusted half of a FIB evaluation: runs in the host's interpreter.

Per (definition, workload) the plugin (plugins/flashinfer) opens a session
(:func:`open_workload`): the inputs of every trial are drawn here, seeded
(:mod:`accelopt.fib.inputs`). Each trial then runs in a worker of the
``torch`` pool through the host's isolated-call service, which calls
:func:`prepare` (the static source rules, the job and its input bytes) and,
with the worker's outcome, :func:`finish`: for the reference it keeps the
outputs; for a solution it judges as FIB's default evaluator does (flashinfer-facts §2.6):
exception -> shape -> dtype -> non-finite -> |x-y| > atol and > rtol*|y|
with the matched ratio, on the first call's outputs and again on the outputs
of the last timed call (outputs are checked after timing), and checks that no
input changed. :func:`close_workload` drops the session.

Without a worker pool the plugin calls :func:`trial`, which runs the same
three steps in this process (trusted code only: tests, ``isolation: inprocess``).
"""
import math
import os
import secrets
import threading
import time

import torch

from .. import evaluators
from ..sandbox import static_check
from . import inputs as fib_inputs
from . import tensors

PASSED = "PASSED"
INCORRECT_SHAPE = "INCORRECT_SHAPE"
INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
INCORRECT_DTYPE = "INCORRECT_DTYPE"
RUNTIME_ERROR = "RUNTIME_ERROR"
COMPILE_ERROR = "COMPILE_ERROR"
TIMEOUT = "TIMEOUT"

TOKEN_PREFIX = evaluators.by_name("fib.trial").token_prefix
WORKER_CALL = ("accelopt.fib.untrusted", "run_trial")
# FIB caps evaluation logs at 5 MiB; workers already cut their part.
MAX_LOG = 5 * 1024 * 1024

_lock = threading.Lock()
_sessions = {}
_pending = {}


class Verdict(Exception):
    """A trial's non-PASSED outcome: ``status`` (FIB's), ``message`` (for the log) and, for
    INCORRECT_NUMERICAL, ``errors`` = (max_abs, max_rel, matched_ratio or None)."""

    def __init__(self, status, message, errors=None):
        super().__init__(message)
        self.status, self.message, self.errors = status, message, errors


def tolerance(definition_name, config):
    """(atol, rtol, required_matched_ratio): the config's, else FIB's defaults (1e-2, 1e-2, 1.0;
    0.95 for moe_fp8_block_scale definitions, FIB's LowBitEvaluator)."""
    ratio = config.get("required_matched_ratio")
    if ratio is None:
        ratio = 0.95 if "moe_fp8_block_scale" in definition_name else 1.0
    return float(config.get("atol", 1e-2)), float(config.get("rtol", 1e-2)), float(ratio)


def open_workload(arg):
    """Draws the inputs of every trial of one workload and keeps them; see the module docstring.

    ``arg``: {"definition": {...}, "workload": {...}, "root": trace-set root,
    "seed": int, "trials": 3, "timing": {"warmup", "iterations", "cold_cache"},
    "profile_baseline": bool, "tolerance": {"atol", "rtol", "required_matched_ratio"},
    "max_workload_bytes": cap (0 or absent: fib_inputs.default_workload_bytes())}.
    Returns {"baseline": id, "seeds": [...], "flush_bytes": n} or {"error": message}
    (the inputs cannot be built, or would take more than the cap: no trace is
    written for this workload).
    """
    import json
    definition = arg.get("definition") or json.loads(arg["definition_text"])  # the text keeps the input order
    workload = arg["workload"]
    trials = max(1, int(arg.get("trials", 3)))
    seeds = [fib_inputs.trial_seed(arg.get("seed", 0), workload["uuid"], t) for t in range(trials)]
    blobs = fib_inputs.BlobCache()
    drawn = []
    try:
        # Sized from the shapes before anything is drawn or read (a huge axis is refused here).
        fib_inputs.check_workload_bytes(definition, workload, trials, arg.get("max_workload_bytes"))
        for seed in seeds:
            values = fib_inputs.make_inputs(definition, workload, arg.get("root", "."), seed, blobs)
            drawn.append({"seed": seed, "inputs": values, "digests": [fib_inputs.digest(v) for v in values],
                          "reference": None, "reference_ms": None})
        outputs = fib_inputs.output_specs(definition, workload)
    except (fib_inputs.InputError, KeyError, ValueError, TypeError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}" if not isinstance(exc, fib_inputs.InputError) else str(exc)}
    timing = dict(arg.get("timing") or {})
    flush = cache_flush_bytes() if timing.get("cold_cache", True) else 0
    session = {"definition": definition, "workload": workload, "trials": drawn, "outputs": outputs,
               "timing": {"warmup": int(timing.get("warmup", 10)), "iterations": int(timing.get("iterations", 50)),
                          "flush_bytes": flush},
               "profile_baseline": bool(arg.get("profile_baseline", True)),
               "tolerance": tolerance(definition["name"], arg.get("tolerance") or {})}
    baseline = "w-" + secrets.token_hex(8)
    with _lock:
        _sessions[baseline] = session
    return {"baseline": baseline, "seeds": seeds, "flush_bytes": flush}


def session(baseline):
    """The open session of ``baseline`` (a dict: definition, workload, trials, outputs, timing,
    tolerance), or None."""
    with _lock:
        return _sessions.get(baseline)


def close_workload(arg):
    """Forgets a session: {"baseline"}. Returns True if it existed."""
    with _lock:
        return _sessions.pop(arg.get("baseline"), None) is not None


def cache_flush_bytes():
    """Twice the last-level cache (FIB flushes twice the GPU's L2 before every timed call), at most 256 MiB."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            try:
                with open(os.path.join(base, entry, "size")) as handle:
                    text = handle.read().strip().upper()
                scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
                best = max(best, int(text.rstrip("KMG")) * scale)
            except (OSError, ValueError):
                continue
    except OSError:
        pass
    return min(2 * (best or 32 * 1024**2), 256 * 1024**2)


def _job(session, trial, role, arg, blobs):
    drawn = session["trials"][trial]
    definition = session["definition"]
    if role == "reference":
        sources = [{"path": "main.py", "content": definition["reference"]}]
        entry, dps = "main.py::run", False
        timing_enabled = session["profile_baseline"]
    else:
        solution = arg["solution"]
        spec = solution.get("spec") or {}
        sources, entry = solution.get("sources") or [], spec.get("entry_point", "")
        dps = arg.get("dps")
        timing_enabled = True
    encoded = [tensors.encode(v, blobs) for v in drawn["inputs"]]
    return {"role": role, "sources": sources, "entry": entry, "dps": dps,
            "dps_default": bool(arg.get("dps_default", True)), "n_inputs": len(drawn["inputs"]),
            "inputs": encoded, "outputs": session["outputs"], "seed": drawn["seed"],
            "timing": dict(session["timing"], enabled=timing_enabled)}


def _static_violation(solution):
    for source in solution.get("sources") or []:
        if source.get("path", "").endswith(".py"):
            found = static_check.first_violation(source.get("content", ""), source["path"], profile="fib")
            if found is not None:
                return f"{source['path']}:{found.line}: {found.kind}: {found.message}"
    return None


def _early(arg, status, message):
    return {"role": arg.get("role", "solution"), "trial": arg.get("trial", 0), "status": status, "log": message}


def prepare_trial(arg):
    """First step: returns ({"token", "backend": "torch", "worker": job}, blobs) or ({"result": verdict}, [])."""
    with _lock:
        session = _sessions.get(arg.get("baseline"))
    role = arg.get("role", "solution")
    if session is None:
        return {"result": _early(arg, RUNTIME_ERROR, "unknown or closed workload session")}, []
    trial = int(arg.get("trial", 0))
    if not 0 <= trial < len(session["trials"]):
        return {"result": _early(arg, RUNTIME_ERROR, f"no trial {trial}")}, []
    if role == "solution":
        language = ((arg.get("solution") or {}).get("spec") or {}).get("language")
        if language != "python":
            return {"result": _early(arg, RUNTIME_ERROR, f"{language} solutions do not run in the CPU torch worker")}, []
        if session["trials"][trial]["reference"] is None:
            return {"result": _early(arg, RUNTIME_ERROR, "the reference has not run for this trial")}, []
        if arg.get("static_checks", True):
            violation = _static_violation(arg["solution"])
            if violation:
                return {"result": _early(arg, COMPILE_ERROR, "anti-cheat source rules (docs/isolation.md): "
                                         + violation)}, []
    blobs = []
    job = _job(session, trial, role, arg, blobs)
    token = TOKEN_PREFIX + secrets.token_hex(12)
    with _lock:
        _pending[token] = {"arg": arg, "session": session, "trial": trial, "role": role,
                           "started": time.perf_counter()}
    return {"token": token, "backend": "torch",
            "worker": {"module": WORKER_CALL[0], "function": WORKER_CALL[1], "arg": job}}, blobs


def prepare_call(call):
    """The evaluator step ``prepare`` (accelopt.evaluators, "fib.trial"): ``prepare_trial`` of the call's arg."""
    return prepare_trial(call.get("arg") or {})


def finish_call(token, outcome, blobs):
    """The evaluator step ``finish``: ``(finish_trial's verdict, [])``."""
    return finish_trial(token, outcome, blobs), []


def discard(token):
    """Forgets a prepared trial (the host abandoned the call). Returns True if it existed."""
    with _lock:
        return _pending.pop(token, None) is not None


def normalize_outputs(value, specs):
    """FIB's output normalisation of what ``run`` returned: a list of tensors in output order.

    ``specs``: [{"name", "shape", "dtype"}] of the definition's outputs. One value
    must match exactly one output, a tuple or list exactly the outputs' count;
    Python numbers become 0-d tensors of the output's dtype. Raises Verdict
    (RUNTIME_ERROR) otherwise."""
    n = len(specs)
    if isinstance(value, (list, tuple)):
        items = list(value)
        if len(items) != n:
            raise Verdict(RUNTIME_ERROR, f"the solution returned {len(items)} values; the definition has {n} outputs")
    else:
        if n != 1:
            raise Verdict(RUNTIME_ERROR, f"the solution returned one value; the definition has {n} outputs")
        items = [value]
    out = []
    for item, spec in zip(items, specs):
        if isinstance(item, (bool, int, float)):
            item = torch.tensor(item, dtype=tensors.torch_dtype(spec["dtype"]))
        if not isinstance(item, torch.Tensor):
            raise Verdict(RUNTIME_ERROR, f"output {spec['name']} is a {type(item).__name__}, not a tensor")
        out.append(item)
    return out


def judge(returned, reference, specs, tol):
    """FIB's check of one call's outputs against the reference's.

    Returns (max_abs, max_rel, matched_ratio) or raises Verdict with the
    status (and the errors for INCORRECT_NUMERICAL)."""
    atol, rtol, required = tol
    outs = normalize_outputs(returned, specs)
    max_abs = max_rel = 0.0
    ratio = 1.0
    for out, ref, spec in zip(outs, reference, specs):
        if tuple(out.shape) != tuple(ref.shape):
            raise Verdict(INCORRECT_SHAPE, f"output {spec['name']}: shape {tuple(out.shape)}, expected "
                                            f"{tuple(ref.shape)}")
        if out.dtype != ref.dtype:
            raise Verdict(INCORRECT_DTYPE, f"output {spec['name']}: dtype {tensors.dtype_name(out.dtype)}, "
                                            f"expected {tensors.dtype_name(ref.dtype)}")
        x = out.float()
        if bool(torch.isinf(x).any()):
            raise Verdict(INCORRECT_NUMERICAL, f"output {spec['name']} holds inf", (math.inf, math.inf, None))
        if bool(torch.isnan(x).any()):
            raise Verdict(INCORRECT_NUMERICAL, f"output {spec['name']} holds NaN", (math.nan, math.nan, None))
        y = ref.float()
        if x.numel() == 0:
            continue
        diff = (x - y).abs()
        rel = diff / (y.abs() + 1e-8)
        bad = (diff > atol) & (rel > rtol)
        this_ratio = 1.0 - float(bad.sum()) / bad.numel()
        max_abs = max(max_abs, float(diff.max()))
        max_rel = max(max_rel, float(rel.max()))
        ratio = min(ratio, this_ratio)
        if this_ratio < required:
            raise Verdict(INCORRECT_NUMERICAL,
                           f"output {spec['name']}: {int(bad.sum())} of {bad.numel()} elements exceed atol={atol} "
                           f"and rtol={rtol} (matched ratio {this_ratio:.4f} < {required})",
                           (max_abs, max_rel, this_ratio))
    return max_abs, max_rel, ratio


def _cut(text):
    if len(text) > MAX_LOG:
        return text[:MAX_LOG] + "[log truncated]"
    return text


def _worker_failure(outcome):
    error = outcome.get("error") or {}
    kind = error.get("kind", "worker_error")
    text = f"{kind}: {error.get('message', '')}"
    if error.get("traceback"):
        text += "\n" + error["traceback"]
    return (TIMEOUT if kind == "timeout" else RUNTIME_ERROR), text


def finish_trial(token, outcome, blobs):
    """Second step: the verdict of a worker's outcome (see the module docstring). Never raises."""
    with _lock:
        pending = _pending.pop(token, None)
    if pending is None:
        return {"role": "solution", "status": RUNTIME_ERROR, "log": "unknown or expired FIB token"}
    arg, session, trial, role = pending["arg"], pending["session"], pending["trial"], pending["role"]
    verdict = {"role": role, "trial": trial, "seed": session["trials"][trial]["seed"],
               "wall_ms": (time.perf_counter() - pending["started"]) * 1e3}
    try:
        _finish(verdict, session, trial, role, outcome, blobs)
    except Verdict as v:
        verdict["status"] = v.status
        verdict["log"] = _cut((verdict.get("log") or "") + ("\n" if verdict.get("log") else "") + v.message)
        if v.errors is not None:
            verdict["max_absolute_error"], verdict["max_relative_error"], ratio = v.errors
            if ratio is not None:
                verdict["matched_ratio"] = ratio
        verdict.pop("median_ms", None)
    except Exception as exc:  # noqa: BLE001 - a malformed worker answer
        verdict["status"] = RUNTIME_ERROR
        verdict["log"] = f"cannot judge the worker's answer: {type(exc).__name__}: {exc}"
        verdict.pop("median_ms", None)
    return json_safe(verdict)


def _finish(verdict, session, trial, role, outcome, blobs):
    if not outcome.get("ok"):
        status, text = _worker_failure(outcome)
        raise Verdict(status, text)
    if outcome.get("integrity"):
        raise Verdict(RUNTIME_ERROR, "anti-cheat (rule R5): the call modified the worker's libraries: "
                       + "; ".join(outcome["integrity"][:5]))
    result = outcome.get("result") or {}
    verdict["log"] = _cut(result.get("log") or "")
    verdict["dps"] = result.get("dps")
    if result.get("status") != "ok":
        status = COMPILE_ERROR if result.get("status") == "compile_error" else RUNTIME_ERROR
        text = result.get("message", "")
        if result.get("traceback"):
            text += "\n" + result["traceback"]
        raise Verdict(status, text)
    drawn = session["trials"][trial]
    specs = session["outputs"]
    returned = tensors.decode(result["returned"], blobs)
    if role == "reference":
        try:
            drawn["reference"] = normalize_outputs(returned, specs)
        except Verdict as v:
            raise Verdict(RUNTIME_ERROR, "the reference's outputs do not fit the definition: " + v.message)
        drawn["reference_ms"] = result.get("median_ms")
        verdict["status"] = "OK"
        verdict["median_ms"] = result.get("median_ms")
        return
    changed = [i for i, (before, after) in enumerate(zip(drawn["digests"], result.get("input_digests") or []))
               if before and after != before]
    if changed:
        names = list(session["definition"]["inputs"].keys())
        raise Verdict(RUNTIME_ERROR, f"anti-cheat: the solution modified input {names[changed[0]]!r} "
                                      "(inputs are read-only)")
    tol = session["tolerance"]
    max_abs, max_rel, ratio = judge(returned, drawn["reference"], specs, tol)
    if "after" in result:
        after = tensors.decode(result["after"], blobs)
        try:
            a_abs, a_rel, a_ratio = judge(after, drawn["reference"], specs, tol)
        except Verdict as v:
            raise Verdict(v.status if v.status != PASSED else INCORRECT_NUMERICAL,
                           "outputs are checked after timing: the last timed call's outputs fail: " + v.message,
                           v.errors) from None
        max_abs, max_rel, ratio = max(max_abs, a_abs), max(max_rel, a_rel), min(ratio, a_ratio)
    elif session["timing"]["iterations"] > 0:
        raise Verdict(RUNTIME_ERROR, "the worker returned no outputs of the timed calls")
    verdict.update(status=PASSED, max_absolute_error=max_abs, max_relative_error=max_rel, matched_ratio=ratio,
                   median_ms=result.get("median_ms"), samples_ms=result.get("samples_ms") or [])


def json_safe(value):
    """``value`` with non-finite floats as FIB's strings "Infinity", "-Infinity", "NaN" (the host's
    JSON bridge has no token for them); dicts and lists are copied."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def trial(arg):
    """One trial without a worker (no pool installed, or ``isolation: inprocess``): trusted code only."""
    import json

    from . import untrusted

    prepared, blobs = prepare_trial(arg)
    if "result" in prepared:
        return json_safe(prepared["result"])
    job = json.loads(json.dumps(prepared["worker"]["arg"]))
    raw = [bytes(memoryview(b).cast("B")) for b in blobs]
    try:
        value, out_blobs = untrusted.run_trial(job, raw)
        outcome = {"ok": True, "result": json.loads(json.dumps(value)), "integrity": []}
    except Exception as exc:  # noqa: BLE001 - reported like a worker failure
        outcome = {"ok": False, "error": {"kind": "python_error", "message": f"{type(exc).__name__}: {exc}"}}
        out_blobs = []
    return finish_trial(prepared["token"], outcome, [bytes(memoryview(b).cast("B")) for b in out_blobs])
