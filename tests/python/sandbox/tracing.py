"""Test helper: the untrusted tracing step of a prepared profile call, run in this process.

A profile call's first worker job traces the candidate into its program
(accelopt.sandbox.untrusted.trace_kernel, issue 34); the tests of passes and shared
inputs start from the first pass of the trusted step, which ``traced`` returns.
"""
import json

from accelopt.sandbox import trusted, untrusted


def traced(prepared, blobs):
    """``(prepared, blobs)`` after the tracing step: the first pass's job, or ``{"result": ...}``
    when tracing failed or the call ended before any pass."""
    if "worker" not in prepared or prepared["worker"]["function"] != "trace_kernel":
        return prepared, blobs
    assert blobs == [] and "shared" not in prepared["worker"]  # no input ever reaches the trace
    value, program = untrusted.trace_kernel(json.loads(json.dumps(prepared["worker"]["arg"])), [])
    outcome = {"ok": True, "result": json.loads(json.dumps(value)), "integrity": []}
    answer, blobs = trusted.finish({"token": prepared["token"], "outcome": outcome}, [bytes(b) for b in program])
    if not answer.get("next_pass"):
        return {"result": answer}, []
    return answer, blobs
