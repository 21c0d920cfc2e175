"""Input sets sent to the worker in passes (accelopt.sandbox.passes and the trusted
flow over several passes): a forced tiny pass budget, one set per pass, must judge
exactly as one pass does."""
import os
import sys

import numpy as np

from sandbox.tracing import traced
from accelopt.sandbox import draws, passes, trusted

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_trusted_split import FIXTURES, HARNESS, _isolated, _request  # noqa: E402 - the split's drivers


def test_plan_splits_evenly_under_the_budget():
    assert passes.plan(6, 100, 1000) == [[0, 1, 2, 3, 4, 5]]
    assert passes.plan(6, 300, 1000) == [[0, 1, 2], [3, 4, 5]]
    assert passes.plan(6, 250, 1000) == [[0, 1, 2], [3, 4, 5]]  # 4 fit, 3 + 3 is as even
    assert passes.plan(6, 2000, 1000) == [[i] for i in range(6)]
    assert passes.plan(5, 400, 1000) == [[0, 1], [2, 3], [4]]
    assert passes.plan(4, 0, 1) == [[0, 1, 2, 3]]
    assert passes.plan(0, 10, 10) == []


def test_pass_bytes_option_environment_and_default():
    saved = os.environ.pop(passes.PASS_BYTES_ENV, None)
    try:
        assert passes.pass_bytes({}) == passes.DEFAULT_PASS_BYTES
        os.environ[passes.PASS_BYTES_ENV] = ""
        assert passes.pass_bytes({}) == passes.DEFAULT_PASS_BYTES
        os.environ[passes.PASS_BYTES_ENV] = "4096"
        assert passes.pass_bytes(None) == 4096
        assert passes.pass_bytes({"pass_bytes": 7}) == 7
    finally:
        os.environ.pop(passes.PASS_BYTES_ENV, None)
        if saved is not None:
            os.environ[passes.PASS_BYTES_ENV] = saved
    for bad in (0, -1, "x", True):
        try:
            passes.pass_bytes({"pass_bytes": bad})
        except ValueError as exc:
            assert "pass_bytes" in str(exc)
        else:
            raise AssertionError(f"{bad!r} accepted")


def test_fingerprints_tell_equal_outputs_from_different_ones():
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    assert passes.fingerprint((a,)) == passes.fingerprint((a.copy(),))
    assert passes.fingerprint((a,)) != passes.fingerprint((a.reshape(4, 16),))
    assert passes.fingerprint((a,)) != passes.fingerprint((a.astype(np.float64),))
    b = a.copy()
    b[3, 3] += 1
    assert passes.fingerprint((a,)) != passes.fingerprint((b,))
    saved, passes.FINGERPRINT_BYTES = passes.FINGERPRINT_BYTES, 64  # a sample of large outputs
    try:
        big = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
        assert passes.fingerprint((big,)) == passes.fingerprint((big.copy(),))
        assert passes.fingerprint((big,)) != passes.fingerprint((big + 1,))
    finally:
        passes.FINGERPRINT_BYTES = saved


def test_one_set_per_pass_judges_as_one_pass():
    jobs = []
    split, _ = _isolated(_request("kernel_good.py"), pass_bytes=1, jobs=jobs)
    whole, _ = _isolated(_request("kernel_good.py"))
    assert split["correct"] and whole["correct"], (split["error"], whole["error"])
    assert len(jobs) == 4 and all(len(job["arg"]["runs"]) == 1 for job in jobs)
    assert sorted(job["arg"]["timed_run"] for job in jobs) == [-1, -1, -1, 0]
    assert split["rel_errors"] == whole["rel_errors"]
    assert split["latency_ms"] == whole["latency_ms"] and split["metrics"] == whole["metrics"]
    assert split["timings"]["worker_calls"] == 4 and whole["timings"]["worker_calls"] == 1
    assert [c["runs"] for c in split["timings"]["calls"]] == [[0], [1], [2], [3]]
    assert [c["runs"] for c in whole["timings"]["calls"]] == [[0, 1, 2, 3]]
    assert trusted.pending() == 0


def test_failures_are_judged_as_in_one_pass():
    for kernel, kind in (("kernel_wrong.py", "wrong_result"), ("kernel_nan.py", "nan_inf"),
                         ("kernel_nki_error.py", "compile_error"), ("kernel_runtime_error.py", "runtime_error"),
                         ("kernel_two_outputs.py", "shape_mismatch")):
        split, _ = _isolated(_request(kernel, "ref_double.py", HARNESS), pass_bytes=1)
        whole, _ = _isolated(_request(kernel, "ref_double.py", HARNESS))
        assert split["error"]["kind"] == whole["error"]["kind"] == kind, (kernel, split["error"], whole["error"])
        assert split["error"]["message"] == whole["error"]["message"], kernel
        assert split["rel_errors"] == whole["rel_errors"] and split["compiled"] == whole["compiled"], kernel
        assert split["correct"] is False and split["latency_ms"] is None
    for kernel, kind in (("adv_return_input.py", trusted.OUTPUT_ALIASES_INPUT),
                         ("adv_mutate_input.py", trusted.INPUT_MUTATED)):
        split, _ = _isolated(_request(kernel), pass_bytes=1)
        assert split["error"]["kind"] == kind, split["error"]
    assert trusted.pending() == 0


def test_an_output_replayed_from_an_earlier_pass_is_stale():
    # A kernel's process can no longer stash outputs (it only traces its program, issue 34),
    # but the judge still recognises an output replayed from an earlier pass (a worker or
    # device that answers with stale buffers): the earlier pass's arrays are freed, its
    # fingerprint remains.
    import json

    from accelopt.sandbox import untrusted
    prepared, blobs = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel",
                                       "arg": _request("kernel_good.py"), "options": {"pass_bytes": 1}})
    prepared, blobs = traced(prepared, blobs)
    first = None
    while True:
        job = json.loads(json.dumps(prepared["worker"]))
        value, out_blobs = getattr(untrusted, job["function"])(job["arg"], [bytes(b) for b in blobs])
        out_blobs = [bytes(b) for b in out_blobs]
        first = first or out_blobs
        outcome = {"ok": True, "result": json.loads(json.dumps(value)), "integrity": []}
        result, blobs = trusted.finish({"token": prepared["token"], "outcome": outcome}, list(first))
        if not result.get("next_pass"):
            break
        prepared = result
    assert result["error"]["kind"] in (trusted.STALE_OUTPUT, "wrong_result"), result["error"]
    assert trusted.pending() == 0


def test_a_stash_across_calls_reaches_no_replay():
    # adv_cache stashes its result on a NumPy function and stores it on later calls: in the
    # candidate's process that is a handle of the trace, never data, and each pass runs the
    # program on its own inputs (in-process here, where the stash outlives the call).
    try:
        result, _ = _isolated(_request("adv_cache.py"), static_checks=False, pass_bytes=1)
        assert result["error"] is None and result["correct"], result["error"]
        trusted.PROGRAMS.clear()  # trace again (a known program would be reused: nothing to stash into)
        result, _ = _isolated(_request("adv_cache.py"), static_checks=False, pass_bytes=1)
        assert result["correct"] is False and result["latency_ms"] is None, result
    finally:
        if hasattr(np.linalg.norm, "replay"):
            del np.linalg.norm.replay


def test_references_start_with_their_pass_and_are_released_after_it():
    trusted.DRAWS.clear()
    trusted.HIDDEN.clear()
    prepared, _ = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel",
                                   "arg": _request("kernel_good.py", seeds=[5, 6, 7]),
                                   "options": {"pass_bytes": 1}})
    prepared, _ = traced(prepared, [])
    state = trusted._states[prepared["token"]]
    first = state["order"][0]
    # the later passes' seeds are drawn ahead (futures until a pass needs them); none started
    started = [trusted._seed_draw(state, i)._future is not None for i in range(len(state["draws"]))]
    # seed 5's reference sizes the passes; the first pass's set is started too
    assert started[0] and all(not s for i, s in enumerate(started) if i > 0 and i != first), started
    draws.settle()
    assert trusted.discard({"token": prepared["token"]})
    jobs = []
    result, _ = _isolated(_request("kernel_good.py", seeds=[5, 6, 7]), pass_bytes=1, jobs=jobs)
    assert result["correct"] and len(jobs) == 4
    assert os.path.isdir(FIXTURES)


def test_later_passes_seeds_are_drawn_ahead_and_judged_alike():
    import concurrent.futures
    request = _request("kernel_good.py", seeds=[5, 6, 7])
    trusted.DRAWS.clear()
    trusted.HIDDEN.clear()
    prepared, _ = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel", "arg": request,
                                   "options": {"pass_bytes": 1}})
    prepared, _ = traced(prepared, [])
    state = trusted._states[prepared["token"]]
    first_pass = {state["order"][p] for p in state["passes"][0]}
    ahead = [i for i, d in enumerate(state["draws"]) if isinstance(d, concurrent.futures.Future)]
    # seed 5 sizes the passes and the first pass's seeds are drawn now; the others are drawn ahead
    assert ahead and all(i != 0 and i not in first_pass for i in ahead), (ahead, first_pass)
    assert all(trusted._seed_draw(state, i).seed == seed for i, seed in enumerate([5, 6, 7]))
    draws.settle()
    assert trusted.discard({"token": prepared["token"]})
    trusted.DRAWS.clear()
    cold, _ = _isolated(request, pass_bytes=1)
    warm, _ = _isolated(request, pass_bytes=1)  # all three in the draw cache: drawn at once, counted
    assert cold["correct"] and warm["correct"], (cold["error"], warm["error"])
    assert cold["timings"]["cached_draws"] == 0 and warm["timings"]["cached_draws"] == 3
    assert abs(cold["latency_ms"] - warm["latency_ms"]) < 1e-9


def _tampered(request, wrong_slots, pass_bytes=None):
    """Runs the split harness, doubling the outputs of the runs whose slot (seed index, -1
    hidden) is in ``wrong_slots`` before the host judges them. Returns (result, hidden
    position in the run order)."""
    import json

    from accelopt.sandbox import untrusted
    options = {} if pass_bytes is None else {"pass_bytes": pass_bytes}
    prepared, blobs = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel", "arg": request,
                                       "options": options})
    prepared, blobs = traced(prepared, blobs)
    state = trusted._states[prepared["token"]]
    order, plan = list(state["order"]), [list(p) for p in state["passes"]]
    index = 0
    while True:
        job = json.loads(json.dumps(prepared["worker"]))
        value, out_blobs = getattr(untrusted, job["function"])(job["arg"], [bytes(b) for b in blobs])
        out_blobs = [bytes(b) for b in out_blobs]
        for local, record in enumerate(value["runs"]):
            if order[plan[index][local]] in wrong_slots:
                for encoded in record["outputs"]:
                    array = np.frombuffer(out_blobs[encoded["blob"]], dtype=encoded["dtype"]) * 2
                    out_blobs[encoded["blob"]] = array.tobytes()
        outcome = {"ok": True, "result": json.loads(json.dumps(value)), "integrity": []}
        result, blobs = trusted.finish({"token": prepared["token"], "outcome": outcome}, out_blobs)
        if not result.get("next_pass"):
            return result, order.index(-1)
        prepared, index = result, index + 1


def test_a_hidden_set_wrong_in_an_early_pass_is_reported_after_the_seeds():
    request = _request("kernel_good.py")
    seen_early = False
    for _ in range(12):  # the hidden set's place is random: see it before the last pass
        split, hidden_at = _tampered(request, {-1}, pass_bytes=1)
        whole, _ = _tampered(request, {-1})
        for result in (split, whole):
            assert result["error"]["kind"] == trusted.STALE_OUTPUT, result["error"]
            assert "wrong on a hidden input set" in result["error"]["message"]
            assert len(result["rel_errors"]) == 3 and result["correct"] is False
        seen_early = seen_early or hidden_at < 3
        # a wrong seed comes first, wherever the hidden set ran
        split, _ = _tampered(request, {-1, 2}, pass_bytes=1)
        whole, _ = _tampered(request, {-1, 2})
        assert split["error"]["kind"] == whole["error"]["kind"] == "wrong_result", (split["error"], whole["error"])
        assert split["error"]["message"] == whole["error"]["message"] and "seed 42" in split["error"]["message"]
        assert split["rel_errors"] == whole["rel_errors"] and len(split["rel_errors"]) == 3
        if seen_early:
            break
    assert seen_early
    assert trusted.pending() == 0


def _ahead_harness(request, wrong_slot=None):
    """prepare -> (ahead) -> run_kernel -> finish with up to two passes in flight, as the host does for
    an ad hoc profile with two workers; doubles the outputs of the run whose slot is ``wrong_slot``.
    Returns (result, the answers finish gave on the way)."""
    import json

    from accelopt.sandbox import untrusted
    prepared, blobs = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel", "arg": request,
                                       "options": {"pass_bytes": 1}})
    prepared, blobs = traced(prepared, blobs)
    token = prepared["token"]
    state = trusted._states[token]
    order, plan = list(state["order"]), [list(p) for p in state["passes"]]
    in_flight, answers = [(0, prepared["worker"], blobs)], []
    while True:
        extra, extra_blobs = trusted.ahead({"token": token})
        if "worker" in extra:
            in_flight.append((extra["pass"], extra["worker"], extra_blobs))
        index, job, job_blobs = in_flight.pop(0)
        value, out_blobs = untrusted.run_kernel(json.loads(json.dumps(job["arg"])), [bytes(b) for b in job_blobs])
        out_blobs = [bytes(b) for b in out_blobs]
        for local, record in enumerate(value["runs"]):
            if order[plan[index][local]] == wrong_slot:
                for encoded in record["outputs"]:
                    array = np.frombuffer(out_blobs[encoded["blob"]], dtype=encoded["dtype"]) * 2
                    out_blobs[encoded["blob"]] = array.tobytes()
        outcome = {"ok": True, "result": json.loads(json.dumps(value)), "integrity": [], "wall_ms": 1.0}
        answer, more = trusted.finish({"token": token, "outcome": outcome}, out_blobs)
        answers.append(answer)
        if answer.get("next_pass"):
            in_flight.append((state["sent"], answer["worker"], more))
        elif not answer.get("pending"):
            return answer, answers


def test_passes_sent_ahead_are_judged_in_order_like_one_by_one():
    request = _request("kernel_good.py", seeds=[5, 6, 7])
    one_by_one, _ = _isolated(request, pass_bytes=1)
    result, answers = _ahead_harness(request)
    assert result["correct"] and result["error"] is None, result["error"]
    assert any(a.get("pending") for a in answers)  # a pass was with a worker before the previous one was judged
    assert result["latency_ms"] == one_by_one["latency_ms"]
    assert len(result["rel_errors"]) == len(one_by_one["rel_errors"]) == 3
    assert trusted.pending() == 0 and trusted.ahead({"token": "gone"}) == ({"none": True}, [])
    # a wrong seed is still reported, and the call's state goes with the answer
    wrong, _ = _ahead_harness(request, wrong_slot=1)
    assert wrong["error"]["kind"] == "wrong_result" and not wrong["correct"], wrong["error"]
    assert trusted.pending() == 0
