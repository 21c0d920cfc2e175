"""accelopt.sandbox.hidden_rng: a hidden set is drawn with the reference's distributions and
dtypes from a fast Generator, differs from the legacy stream of the same seed, is
reproducible from its seed, and leaves NumPy's module functions as they were."""
import os

import numpy as np

from accelopt import loading
from accelopt.sandbox import draws
from accelopt.sandbox.hidden_rng import fast_global_rng

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def _legacy_style_inputs():
    """What NKIBench references call (np.random.normal everywhere), plus the other legacy forms."""
    return [np.random.normal(loc=0, scale=1.0, size=(256, 64)).astype(np.float32),
            np.random.randn(32, 8), np.random.rand(16), np.random.random((4, 4)),
            np.random.uniform(-1, 1, size=10), np.random.standard_normal(5), np.random.normal()]


def test_same_shapes_dtypes_and_distribution_another_stream():
    with fast_global_rng(7):
        fast = _legacy_style_inputs()
    np.random.seed(7)
    legacy = _legacy_style_inputs()
    for a, b in zip(fast, legacy):
        assert np.shape(a) == np.shape(b) and np.asarray(a).dtype == np.asarray(b).dtype
    assert not np.array_equal(fast[0], legacy[0])
    assert abs(fast[0].mean()) < 0.05 and abs(fast[0].std() - 1) < 0.05
    assert 0 <= fast[2].min() and fast[2].max() < 1 and -1 <= fast[4].min() and fast[4].max() < 1
    with fast_global_rng(7):
        again = _legacy_style_inputs()
    assert all(np.array_equal(a, b) for a, b in zip(fast, again))


def test_module_functions_are_restored_also_after_an_error():
    before = np.random.normal
    try:
        with fast_global_rng(1):
            assert np.random.normal is not before
            raise RuntimeError("reference failed")
    except RuntimeError:
        pass
    assert np.random.normal is before


def test_hidden_draws_use_it_and_published_seeds_keep_the_legacy_stream():
    reference = loading.load_reference(os.path.join(FIXTURES, "ref_tiny.py"))
    published = draws.draw(reference, 21)
    hidden = draws.draw(reference, 21, hidden=True)
    np.random.seed(21)
    legacy = reference.get_inputs()
    with fast_global_rng(21):
        fast = reference.get_inputs()
    assert np.array_equal(published.nki_inputs[0], legacy[0])
    assert np.array_equal(hidden.nki_inputs[0], fast[0])
