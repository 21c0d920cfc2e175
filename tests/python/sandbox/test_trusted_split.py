"""The trusted/untrusted split of profiling (accelopt.sandbox.trusted / .untrusted),
with the worker simulated in-process by calling run_kernel directly (the C++ tests
under tests/host/worker/ run the same kernels in real worker processes)."""
import json
import os

import numpy as np

from accelopt import profile
from sandbox.tracing import traced
from accelopt.sandbox import trusted, untrusted

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
HARNESS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "harness", "fixtures")


def _request(kernel, reference="ref_tiny.py", folder=FIXTURES, **extra):
    request = {"kernel": os.path.join(folder, kernel), "reference": os.path.join(folder, reference),
               "backend": "emulator", "target": "trn1", "seeds": [0, 21, 42]}
    request.update(extra)
    return request


def _isolated(request, static_checks=True, outcome=None, max_batch=None, pass_bytes=None, jobs=None):
    """prepare -> run_kernel -> finish, one round per pass; returns (result, first job).
    ``jobs`` (list, optional) receives every worker job sent."""
    options = {"static_checks": static_checks}
    if pass_bytes is not None:
        options["pass_bytes"] = pass_bytes
    prepared, blobs = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel", "arg": request,
                                       "options": options})
    prepared, blobs = traced(prepared, blobs)
    if "result" in prepared:
        return prepared["result"], None
    first = None
    while True:
        job = json.loads(json.dumps(prepared["worker"]))  # what crosses the pipe: JSON plus raw bytes
        first = first or job
        if jobs is not None:
            jobs.append(job)
        if max_batch is not None:
            job["arg"]["max_batch"] = max_batch
        out_blobs = []
        if outcome is None:
            value, out_blobs = getattr(untrusted, job["function"])(job["arg"], [bytes(b) for b in blobs])
            round_outcome = {"ok": True, "result": json.loads(json.dumps(value)), "integrity": []}
        else:
            round_outcome = outcome
        result, blobs = trusted.finish({"token": prepared["token"], "outcome": round_outcome},
                                       [bytes(b) for b in out_blobs])
        if not result.get("next_pass"):
            assert blobs == []
            return result, first
        prepared = result


def test_good_kernel_matches_the_in_process_harness():
    result, job = _isolated(_request("kernel_good.py"))
    classic = profile.profile_kernel(_request("kernel_good.py"))
    assert result["error"] is None and result["correct"], result["error"]
    assert set(result) == set(classic)
    assert len(result["rel_errors"]) == 3 and max(result["rel_errors"]) < 1e-6
    assert result["latency_ms"] > 0 and result["estimated"] is True
    assert abs(result["latency_ms"] - classic["latency_ms"]) < 1e-9  # same shapes, same cost model
    # the worker got inputs for 3 seeds + 1 hidden set and never a reference output
    assert len(job["arg"]["runs"]) == 4 and "expected" not in json.dumps(job["arg"])
    assert job["arg"]["timed_run"] >= 0
    assert trusted.pending() == 0


def test_harness_fixture_outcomes_are_unchanged():
    for kernel, kind in (("kernel_wrong.py", "wrong_result"), ("kernel_nan.py", "nan_inf"),
                         ("kernel_nki_error.py", "compile_error"), ("kernel_runtime_error.py", "runtime_error"),
                         ("kernel_syntax_error.py", "compile_error"), ("kernel_float16.py", "precision_downgrade"),
                         ("kernel_two_outputs.py", "shape_mismatch")):
        result, _ = _isolated(_request(kernel, "ref_double.py", HARNESS))
        assert result["error"] is not None and result["error"]["kind"] == kind, (kernel, result["error"])
        assert result["correct"] is False and result["latency_ms"] is None


def test_hidden_seed_is_fresh_and_never_a_published_seed():
    seen = set()
    for _ in range(3):
        prepared, _ = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel",
                                       "arg": _request("kernel_good.py")})
        prepared, _ = traced(prepared, [])
        state = trusted._states[prepared["token"]]
        assert state["hidden_seed"] not in state["seeds"]
        seen.add(state["hidden_seed"])
        assert trusted.discard({"token": prepared["token"]})
    assert len(seen) == 3
    assert trusted.pending() == 0


def test_anti_cheat_rules_in_the_judge():
    result, _ = _isolated(_request("adv_return_input.py"))
    assert result["error"]["kind"] == trusted.OUTPUT_ALIASES_INPUT, result["error"]
    result, _ = _isolated(_request("adv_mutate_input.py"))
    assert result["error"]["kind"] == trusted.INPUT_MUTATED, result["error"]
    result, _ = _isolated(_request("adv_cache.py"))
    assert result["error"]["kind"] == trusted.FORBIDDEN_ACCESS  # static rule first
    try:
        # The kernel's process only traces (issue 34): what it stashes is a handle of its own
        # trace, never an output, and every input set runs the program. Within a request the
        # stash changes nothing (one trace), also with the sets split; the stash that outlives
        # the call (in this in-process test only, never in a worker's fresh process) names a
        # handle of another program in the next request's, which is refused or wrong.
        result, _ = _isolated(_request("adv_cache.py"), static_checks=False, max_batch=1)
        assert result["error"] is None and result["correct"], result["error"]
        trusted.PROGRAMS.clear()  # trace again (a known program would be reused: nothing to stash into)
        result, _ = _isolated(_request("adv_cache.py"), static_checks=False)
        assert result["correct"] is False and result["error"]["kind"] in (
            trusted.FORBIDDEN_ACCESS, "wrong_result", trusted.STALE_OUTPUT), result["error"]
    finally:
        if hasattr(np.linalg.norm, "replay"):
            del np.linalg.norm.replay
    result, _ = _isolated(_request("adv_sleep.py"))
    assert result["error"]["kind"] == trusted.FORBIDDEN_IMPORT and "adv_sleep.py:2" in result["error"]["message"]


def test_worker_failures_become_result_errors():
    for kind in ("timeout", "crash", "out_of_memory", "sandbox_violation"):
        outcome = {"ok": False, "error": {"kind": kind, "message": f"simulated {kind}"}}
        result, _ = _isolated(_request("kernel_good.py"), outcome=outcome)
        assert result["error"]["kind"] == kind and result["correct"] is False and result["latency_ms"] is None
    outcome = {"ok": True, "result": {"compiled": True, "runs": []}, "integrity": ["numpy.allclose was replaced"]}
    result, _ = _isolated(_request("kernel_good.py"), outcome=outcome)
    assert result["error"]["kind"] == trusted.FORBIDDEN_ACCESS and "numpy.allclose" in result["error"]["message"]
    outcome = {"ok": True, "result": {"compiled": True, "runs": [], "error": None}, "integrity": []}
    result, _ = _isolated(_request("kernel_good.py"), outcome=outcome)
    assert result["error"]["kind"] == trusted.WORKER_ERROR
    unknown, _ = trusted.finish({"token": "nope", "outcome": {"ok": True}})
    assert unknown["error"]["kind"] == trusted.WORKER_ERROR
    assert trusted.pending() == 0


def test_other_functions_run_plain():
    assert trusted.prepare({"module": "sandbox_probe", "function": "echo", "arg": 1}) == ({"plain": True}, [])


def test_outputs_that_do_not_match_their_descriptor_are_a_worker_error():
    prepared, blobs = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel",
                                       "arg": _request("kernel_good.py")})
    prepared, blobs = traced(prepared, blobs)
    value, out_blobs = untrusted.run_kernel(json.loads(json.dumps(prepared["worker"]["arg"])), [bytes(b) for b in blobs])
    truncated = [bytes(b)[:-4] for b in out_blobs]
    result, _ = trusted.finish({"token": prepared["token"], "outcome": {"ok": True, "result": value, "integrity": []}},
                               truncated)
    assert result["error"]["kind"] == trusted.WORKER_ERROR and "bytes" in result["error"]["message"], result["error"]
    assert trusted.pending() == 0


def test_the_loaded_source_is_what_inspection_sees_not_the_file_on_disk():
    # the worker runs a source string under the candidate's path; the emulator's liveness
    # analysis reads source through inspect, which must see that string
    import tempfile
    import nki_emu
    from nki_emu import liveness
    nki_emu.install()  # the candidate imports neuronxcc.nki (this test may run alone)
    kernel = ("import numpy as np\nimport neuronxcc.nki.language as nl\n\n\n"
              "def kernel(v1):\n"
              "    out = nl.ndarray((2, 128, 32), dtype=np.float32, buffer=nl.shared_hbm)\n"
              "    x = nl.ndarray((2, nl.par_dim(128), 32), dtype=np.float32, buffer=nl.sbuf)\n"
              "    for i0 in nl.affine_range(2):\n"
              "        x[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]] = nl.load(\n"
              "            v1[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]])\n"
              "        nl.store(out[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]],\n"
              "                 value=x[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]])\n"
              "    return out\n")
    with tempfile.TemporaryDirectory() as folder:
        missing = os.path.join(folder, "never_written.py")
        fn, name = untrusted.load_kernel_source(kernel, missing)
        assert liveness.analyse(fn) == {fn.__code__.co_firstlineno + 3: [("x", (("i0", 0),))]}
        stale = os.path.join(folder, "stale.py")
        with open(stale, "w") as handle:
            handle.write("# another candidate\n" * 40)
        fn, name = untrusted.load_kernel_source(kernel, stale)
        assert liveness.analyse(fn) != {}


def test_batched_worker_runs_give_the_records_of_one_by_one_runs():
    prepared, blobs = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel",
                                       "arg": _request("kernel_good.py")})
    prepared, blobs = traced(prepared, blobs)
    assert prepared["next_pass"] and prepared["worker"]["function"] == "run_kernel"
    job = json.loads(json.dumps(prepared["worker"]["arg"]))
    assert "kernel_source" not in job and "program" in job  # the trusted step never gets the candidate's code
    batched, batched_blobs = untrusted.run_kernel(job, [bytes(b) for b in blobs])
    single, single_blobs = untrusted.run_kernel(dict(job, batch=False), [bytes(b) for b in blobs])
    assert batched["timings"]["batched"] is True and single["timings"]["batched"] is False
    assert batched["latency_ms"] == single["latency_ms"] and batched["metrics"] == single["metrics"]
    assert len(batched["runs"]) == len(single["runs"]) == 4
    for a, b in zip(batched["runs"], single["runs"]):
        assert a["aliasing"] is None and b["aliasing"] is None
        assert a["input_digests"] == [None] and b["input_digests"][0]  # read-only inputs: nothing to digest
        assert [o["shape"] for o in a["outputs"]] == [o["shape"] for o in b["outputs"]]
    assert [bytes(memoryview(x)) for x in batched_blobs] == [bytes(memoryview(x)) for x in single_blobs]
    assert {"load_ms", "run_ms", "trace_replay_ms", "passes", "peak_rss_bytes"} <= set(batched["timings"])
    result, _ = trusted.finish({"token": prepared["token"], "outcome": {"ok": True, "result": json.loads(
        json.dumps(batched)), "integrity": []}}, [bytes(memoryview(x)) for x in batched_blobs])
    assert result["correct"], result["error"]
    for key in ("load_ms", "validate_ms", "draw_ms", "run_ms", "judge_ms", "transfer_ms", "total_ms"):
        assert isinstance(result["timings"][key], float), key
    assert trusted.pending() == 0


def test_a_hidden_only_call_runs_one_secret_set_and_no_published_seed():
    jobs = []
    result, job = _isolated(_request("kernel_good.py", seeds=[], hidden_only=True), jobs=jobs)
    assert result["error"] is None and result["correct"] and result["latency_ms"] > 0, result["error"]
    assert result["rel_errors"] == [] and len(jobs) == 1 and len(job["arg"]["runs"]) == 1
    assert job["arg"]["timed_run"] == 0
    # wrong on the hidden set: a plain wrong result (no published seed passed, so not stale_output)
    wrong, _ = _isolated(_request("kernel_wrong.py", "ref_double.py", HARNESS, seeds=[], hidden_only=True))
    assert wrong["error"]["kind"] == "wrong_result" and "hidden" in wrong["error"]["message"], wrong["error"]
    # published seeds with hidden_only, or a non-boolean, are refused
    for bad in ({"hidden_only": True}, {"seeds": [], "hidden_only": "yes"}):
        refused, _ = _isolated(_request("kernel_good.py", **bad) if "seeds" in bad else
                               dict(_request("kernel_good.py"), **bad))
        assert refused["error"] is not None and "hidden_only" in refused["error"]["message"], refused["error"]
    assert trusted.pending() == 0


def test_a_known_program_is_not_traced_again():
    # a screen's program serves its confirmation (accelopt.sandbox.programs)
    trusted.PROGRAMS.clear()
    request = _request("kernel_good.py")
    first, _ = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel", "arg": request})
    assert first["worker"]["function"] == "trace_kernel"
    first, _ = traced(first, [])
    trusted.discard({"token": first["token"]})
    again, blobs = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel", "arg": request})
    assert again["worker"]["function"] == "run_kernel" and "program" in again["worker"]["arg"]
    trusted.discard({"token": again["token"]})
    other = dict(request, target="trn2")  # another target, another program
    third, _ = trusted.prepare({"module": "accelopt.profile", "function": "profile_kernel", "arg": other})
    assert third["worker"]["function"] == "trace_kernel"
    trusted.discard({"token": third["token"]})
    assert trusted.pending() == 0
