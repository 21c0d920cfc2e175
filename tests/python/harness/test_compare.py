"""Correctness judgement of one seed: L2 tolerance, shapes, NaN/Inf, counts."""
import numpy as np

from accelopt import compare
from accelopt import result as R


def _kind(fn):
    try:
        fn()
    except R.HarnessError as exc:
        return exc.kind, exc
    raise AssertionError("expected a HarnessError")


def test_within_tolerance_passes_and_reports_error():
    ref = np.arange(1, 129, dtype=np.float32).reshape(8, 16)
    out = ref * np.float32(1 + 1e-6)
    rel = compare.compare_outputs([out], (ref,), 2e-5, 0)
    assert 0 < rel < 2e-5
    assert abs(rel - 1e-6) < 1e-7


def test_outside_tolerance_is_wrong_result_with_details():
    ref = np.ones((4, 4), np.float32)
    out = ref.copy()
    out[0, 0] = 1.5
    kind, exc = _kind(lambda: compare.compare_outputs([out], (ref,), 2e-5, 42))
    assert kind == R.WRONG_RESULT
    assert "seed 42" in exc.message and "max abs diff 5.0000e-01" in exc.message
    assert abs(exc.rel_error - 0.5 / 4.0) < 1e-12


def test_nan_and_inf_are_their_own_kind():
    ref = np.ones((2, 3), np.float32)
    for bad in (np.nan, np.inf, -np.inf):
        out = ref.copy()
        out[1, 2] = bad
        kind, exc = _kind(lambda: compare.compare_outputs([out], (ref,), 2e-5, 7))
        assert kind == R.NAN_INF and "1 NaN/Inf" in exc.message


def test_shape_and_count_mismatch():
    ref = np.ones((2, 3), np.float32)
    kind, _ = _kind(lambda: compare.compare_outputs([np.ones((3, 2), np.float32)], (ref,), 2e-5, 0))
    assert kind == R.SHAPE_MISMATCH
    kind, exc = _kind(lambda: compare.compare_outputs([ref, ref], (ref,), 2e-5, 0))
    assert kind == R.SHAPE_MISMATCH and "2 output(s)" in exc.message


def test_zero_reference_needs_exact_match():
    ref = np.zeros((2, 2), np.float32)
    assert compare.compare_outputs([ref.copy()], (ref,), 2e-5, 0) == 0.0
    kind, _ = _kind(lambda: compare.compare_outputs([ref + 1e-30], (ref,), 2e-5, 0))
    assert kind == R.WRONG_RESULT


def test_scalars():
    assert compare.compare_outputs([3], (3,), 2e-5, 0) == 0.0
    kind, _ = _kind(lambda: compare.compare_outputs([4], (3,), 2e-5, 0))
    assert kind == R.WRONG_RESULT
    assert compare.compare_outputs([np.float32(2.0)], (2.0,), 2e-5, 0) == 0.0


def test_non_finite_reference_is_reference_error():
    kind, _ = _kind(lambda: compare.check_reference_outputs((np.array([1.0, np.nan]),)))
    assert kind == R.REFERENCE_ERROR
    compare.check_reference_outputs((np.array([1.0, 2.0]), 3))


def test_as_tuple():
    a = np.zeros(2)
    assert compare.as_tuple(a)[0] is a and len(compare.as_tuple(a)) == 1
    assert compare.as_tuple([1, 2]) == (1, 2)
    assert compare.as_tuple((1,)) == (1,)


def test_large_outputs_are_judged_in_chunks_with_the_same_result():
    rng = np.random.default_rng(3)
    ref = rng.standard_normal((64, 100)).astype(np.float32)
    out = ref + rng.standard_normal((64, 100)).astype(np.float32) * 1e-3
    whole = compare.compare_outputs((out,), (ref,), 1.0, 0)
    whole_norms = compare.reference_norms((ref,))
    try:
        wrong_whole = compare.compare_outputs((out,), (ref,), 1e-9, 0)
    except R.HarnessError as exc:
        wrong_whole = exc.message
    saved = compare.CHUNK_BYTES
    compare.CHUNK_BYTES = 8 * 1000  # 1000 float64 per chunk: 7 chunks
    try:
        assert compare._large(out) and len(compare._chunks(out.size)) == 7
        chunked = compare.compare_outputs((out,), (ref,), 1.0, 0)
        assert abs(chunked - whole) <= 1e-12 * whole
        assert abs(compare.reference_norms((ref,))[0] - whole_norms[0]) <= 1e-12 * whole_norms[0]
        try:
            compare.compare_outputs((out,), (ref,), 1e-9, 0)
        except R.HarnessError as exc:
            assert exc.kind == R.WRONG_RESULT
            # the same max abs diff and norms in the message (printed to 4-5 digits)
            assert exc.message.split("(")[1] == wrong_whole.split("(")[1]
        else:
            raise AssertionError("a wrong chunked output passed")
        bad = out.copy()
        bad[40, 7] = np.nan
        try:
            compare.compare_outputs((bad,), (ref,), 1.0, 0)
        except R.HarnessError as exc:
            assert exc.kind == R.NAN_INF and "1 NaN/Inf" in exc.message
        else:
            raise AssertionError("NaN passed")
    finally:
        compare.CHUNK_BYTES = saved
        compare._SCRATCH.buffer = None
