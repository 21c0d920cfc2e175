"""profile_kernel on the emulator: one tiny kernel per outcome (fixtures/)."""
import json
import os

from accelopt import profile
from accelopt import result as R
from accelopt.backends import PROFILE_FIELDS
from accelopt.backends import emulator

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
RESULT_KEYS = {"compiled", "correct", "latency_ms", "estimated", "backend", "backend_reason", "sdk_version", "target", "metrics",
               "rel_errors", "input_shapes", "error", "timings"}


def _profile(kernel, reference="ref_double.py", **extra):
    request = {"kernel": os.path.join(FIXTURES, kernel), "reference": os.path.join(FIXTURES, reference),
               "backend": "emulator", "target": "trn1"}
    request.update(extra)
    result = profile.profile_kernel(request)
    assert set(result) == RESULT_KEYS, sorted(result)
    json.dumps(result)  # the host converts it to JSON
    return result


def _failed(result, kind):
    assert result["error"] is not None, result
    assert result["error"]["kind"] == kind, result["error"]
    assert result["correct"] is False and result["latency_ms"] is None
    return result["error"]


def test_correct_kernel_is_timed():
    result = _profile("kernel_ok.py")
    assert result["error"] is None, result["error"]
    assert result["compiled"] and result["correct"]
    assert len(result["rel_errors"]) == 5 and max(result["rel_errors"]) < 1e-6
    assert result["estimated"] is True and result["backend"] == "emulator"
    assert result["latency_ms"] > 0
    assert len(result["input_shapes"]) == 1 and len(result["input_shapes"][0]) == 2  # ref_double's one (M, N) input
    metrics = result["metrics"]
    assert metrics.get("hbm_read_bytes", 0) >= 256 * 512 * 4, metrics
    assert sum(f in metrics for f in PROFILE_FIELDS) >= 8, sorted(metrics)


def test_optimized_kernel_name_and_timing_off():
    result = _profile("kernel_optimized_name.py", timing=False, seeds=[1, 2])
    assert result["correct"] and result["error"] is None
    assert result["latency_ms"] is None and result["metrics"] == {}
    assert len(result["rel_errors"]) == 2


def test_syntax_error_is_compile_error_with_line():
    error = _failed(_profile("kernel_syntax_error.py"), R.COMPILE_ERROR)
    assert "kernel_syntax_error.py:6" in error["message"], error["message"]
    assert "SyntaxError" in error["traceback"]


def test_missing_kernel_attribute_is_compile_error():
    error = _failed(_profile("kernel_no_attr.py"), R.COMPILE_ERROR)
    assert "optimized_kernel" in error["message"]
    _failed(_profile("no_such_kernel.py"), R.COMPILE_ERROR)


def test_nki_rule_violation_is_compile_error_with_line():
    result = _profile("kernel_nki_error.py")
    error = _failed(result, R.COMPILE_ERROR)
    assert result["compiled"] is False
    assert "kernel_nki_error.py:10" in error["message"], error["message"]
    assert "128" in error["message"]


def test_python_error_in_kernel_is_runtime_error():
    error = _failed(_profile("kernel_runtime_error.py"), R.RUNTIME_ERROR)
    assert "IndexError" in error["message"]
    assert "kernel_runtime_error.py:13" in error["message"], error["message"]


def test_wrong_shape_and_output_count():
    error = _failed(_profile("kernel_shape_mismatch.py"), R.SHAPE_MISMATCH)
    assert "seed 0" in error["message"]
    error = _failed(_profile("kernel_two_outputs.py"), R.SHAPE_MISMATCH)
    assert "2 output(s)" in error["message"]


def test_nan_inf_output():
    result = _profile("kernel_nan.py")
    error = _failed(result, R.NAN_INF)
    assert result["compiled"] is True and "seed 0" in error["message"]


def test_wrong_result_reports_error_of_failing_seed():
    result = _profile("kernel_wrong.py")
    error = _failed(result, R.WRONG_RESULT)
    assert "seed 0" in error["message"] and "max abs diff" in error["message"]
    assert len(result["rel_errors"]) == 1 and abs(result["rel_errors"][0] - 5e-4) < 1e-5
    # a looser tolerance accepts it
    assert _profile("kernel_wrong.py", rel_tol=1e-3)["correct"]


def test_float16_is_precision_downgrade():
    result = _profile("kernel_float16.py")
    error = _failed(result, R.PRECISION_DOWNGRADE)
    assert result["compiled"] is False and result["rel_errors"] == []
    assert "float16" in error["message"]


def test_reference_errors():
    error = _failed(_profile("kernel_ok.py", reference="ref_broken.py"), R.REFERENCE_ERROR)
    assert "reference exploded" in error["message"]
    error = _failed(_profile("kernel_ok.py", reference="ref_incomplete.py"), R.REFERENCE_ERROR)
    assert "transform_nki_outputs" in error["message"]
    _failed(_profile("kernel_ok.py", reference="no_such_reference.py"), R.REFERENCE_ERROR)


def test_timing_failure_keeps_correctness():
    original = emulator.EmulatorBackend.measure

    def broken(self, kernel, args):
        raise RuntimeError("cost model unavailable")
    emulator.EmulatorBackend.measure = broken
    try:
        result = _profile("kernel_ok.py")
    finally:
        emulator.EmulatorBackend.measure = original
    assert result["error"]["kind"] == R.TIMING_ERROR
    assert result["correct"] is True and result["latency_ms"] is None
    assert "cost model unavailable" in result["error"]["message"]


def test_bad_requests_never_raise():
    for request in (None, {}, {"kernel": "k.py"},
                    {"kernel": "k.py", "reference": "r.py", "backend": "cuda"},
                    {"kernel": "k.py", "reference": "r.py", "target": "trn9"},
                    {"kernel": "k.py", "reference": "r.py", "seeds": []},
                    {"kernel": "k.py", "reference": "r.py", "rel_tol": -1}):
        result = profile.profile_kernel(request)
        assert result["error"]["kind"] == R.RUNTIME_ERROR, (request, result)
        assert result["correct"] is False


def test_cost_model_crash_is_timing_error_not_kernel_error():
    import nki_emu
    original = nki_emu.run

    def run_without_cost_model(kernel, args, *, target="trn1", trace=True):
        if trace:
            raise ZeroDivisionError("tracer bug")
        return original(kernel, args, target=target, trace=False)
    nki_emu.run = run_without_cost_model
    try:
        result = _profile("kernel_ok.py")
        wrong = _profile("kernel_runtime_error.py")
    finally:
        nki_emu.run = original
    assert result["error"]["kind"] == R.TIMING_ERROR, result["error"]
    assert "tracer bug" in result["error"]["message"]
    assert result["correct"] is True and len(result["rel_errors"]) == 5
    assert wrong["error"]["kind"] == R.RUNTIME_ERROR and "IndexError" in wrong["error"]["message"]
