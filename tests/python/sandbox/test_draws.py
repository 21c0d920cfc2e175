"""accelopt.sandbox.draws (input sets, background reference outputs, hidden sets drawn
ahead) and draw_cache's resizing; the judge's one-pass comparison (accelopt.compare)."""
import os
import threading

import numpy as np

from accelopt import compare, loading
from accelopt import result as R
from accelopt.sandbox import draw_cache, draws

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
HARNESS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "harness", "fixtures")


def test_a_draw_is_its_seed_s_inputs_and_its_reference_is_computed_in_the_background():
    reference = loading.load_reference(os.path.join(FIXTURES, "ref_tiny.py"))
    drawn = draws.draw(reference, 21)
    np.random.seed(21)
    expected_inputs = reference.get_inputs()
    assert np.array_equal(drawn.nki_inputs[0], expected_inputs[0]) and not drawn.nki_inputs[0].flags.writeable
    seen, sizes = threading.Event(), []
    drawn.start(reference, on_done=lambda d: (sizes.append(d.nbytes), seen.set()))
    assert np.array_equal(drawn.expected(), 2 * expected_inputs[0]) and seen.wait(10)
    assert sizes == [2 * expected_inputs[0].nbytes]  # on_done sees the outputs counted (the cache's size)
    assert not drawn.expected().flags.writeable and drawn.reference_ms is not None
    assert drawn.norms() == compare.reference_norms((drawn.expected(),))
    assert drawn.digest(0) == draw_cache_digest(expected_inputs[0])
    assert drawn.nbytes == 2 * expected_inputs[0].nbytes


def draw_cache_digest(array):
    from accelopt.sandbox import codec
    return codec.digest(array)


def test_a_failing_reference_is_reported_when_its_outputs_are_needed():
    reference = loading.load_reference(os.path.join(HARNESS, "ref_broken.py"))
    try:
        drawn = draws.draw(reference, 0)
        drawn.start(reference)
        drawn.expected()
    except R.HarnessError as exc:
        assert exc.kind == R.REFERENCE_ERROR
    else:
        raise AssertionError("expected reference_error")


def test_hidden_sets_are_fresh_secret_draws_and_spares_serve_one_call_each():
    reference = loading.load_reference(os.path.join(FIXTURES, "ref_tiny.py"))
    spares = draws.HiddenSpares()
    seeds = {0, 21, 42}
    first, how = spares.take(reference, "k", seeds)
    assert how == "drawn" and first.seed not in seeds  # first call: nothing drawn ahead, nothing prepared
    second, how = spares.take(reference, "k", seeds)
    assert how == "drawn"  # the repeat prepares a spare for the next call
    third, how = spares.take(reference, "k", seeds)
    assert how == "spare" and len({first.seed, second.seed, third.seed}) == 3
    assert np.array_equal(third.expected(), 2 * third.nki_inputs[0])
    other, how = spares.take(reference, "other", seeds)
    assert how == "drawn"
    fourth, how = spares.take(reference, "k", seeds | {0})
    assert fourth.seed not in (first.seed, second.seed, third.seed)
    draws.settle()  # every queued reference and spare is done
    assert fourth.reference_ms is not None
    spares.clear()


def test_a_hidden_set_serves_at_most_its_uses_within_the_byte_budget():
    reference = loading.load_reference(os.path.join(FIXTURES, "ref_tiny.py"))
    spares = draws.HiddenSpares()
    seeds = {0, 21}
    first, how = spares.take(reference, "k", seeds, uses=3)
    assert how == "drawn"
    first.start(reference)
    again = [spares.take(reference, "k", seeds, uses=3) for _ in range(2)]
    assert [h for _, h in again] == ["reused", "reused"] and all(d is first for d, _ in again)
    fresh, how = spares.take(reference, "k", seeds, uses=3)  # served its three calls
    assert how != "reused" and fresh.seed != first.seed
    assert spares.take(reference, "other", seeds, uses=2)[0] is not fresh  # per reference
    # a call that allows no reuse drops the kept set; a published seed equal to it is never served it
    assert spares.take(reference, "k", seeds)[1] != "reused"
    kept, _ = spares.take(reference, "k", seeds, uses=5)
    assert spares.take(reference, "k", seeds | {kept.seed}, uses=5)[0] is not kept
    spares.clear()
    spares.take(reference, "k", seeds, uses=10**6)
    assert spares._kept["k"][1] == draws.MAX_REUSE - 1  # clamped: a set serves at most MAX_REUSE calls
    # the byte budget: a set larger than it is not kept
    tight = draws.HiddenSpares(reuse_budget=1)
    big, _ = tight.take(reference, "k", seeds, uses=5)
    assert tight.take(reference, "k", seeds, uses=5)[0] is not big
    draws.settle()
    spares.clear()


def test_draw_cache_counts_a_draw_s_outputs_once_they_exist():
    cache = draw_cache.DrawCache(budget_bytes=1000)
    cache.get("a", lambda: np.zeros(100, np.float32))
    cache.get("b", lambda: np.zeros(100, np.float32))
    assert cache.stats()["bytes"] == 800
    cache.resize("a", 700)  # a's outputs arrived: over budget, the oldest (a) goes
    assert cache.stats()["entries"] == 1 and cache.stats()["bytes"] == 400
    cache.resize("missing", 5)


def test_one_pass_judge_matches_the_plain_l2_errors():
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(64, 33)).astype(np.float32)
    out = ref + rng.normal(size=ref.shape).astype(np.float32) * 1e-7
    rel = compare.compare_outputs([out], (ref,), 2e-5, 0, compare.reference_norms((ref,)))
    diff_l2, ref_l2, _ = compare.l2_errors(out, ref)
    assert rel == diff_l2 / ref_l2 == compare.compare_outputs([out], (ref,), 2e-5, 0)
    wrong = out.copy()
    wrong[3, 4] += 1.0
    for norms in (None, compare.reference_norms((ref,))):
        try:
            compare.compare_outputs([wrong], (ref,), 2e-5, 5, norms)
        except R.HarnessError as exc:
            _, _, max_abs = compare.l2_errors(wrong, ref)
            assert exc.kind == R.WRONG_RESULT and f"max abs diff {max_abs:.4e}" in exc.message
    big = np.full((3, 3), 3e38, np.float32)
    assert compare.compare_outputs([big], (big,), 2e-5, 0) == 0.0  # huge but finite: no overflow
    bad = big.copy()
    bad[0, 0] = np.inf
    try:
        compare.compare_outputs([bad], (big,), 2e-5, 0)
    except R.HarnessError as exc:
        assert exc.kind == R.NAN_INF and "1 NaN/Inf" in exc.message
    else:
        raise AssertionError("expected nan_inf")
