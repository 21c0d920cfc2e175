"""Run-time BLAS thread control (nki_emu.blas_threads)."""
import numpy as np

from nki_emu import blas_threads


def test_thread_count_round_trips_and_matmul_still_works():
    before = blas_threads.get_threads()
    if before is None:  # not OpenBLAS: the calls are documented no-ops
        assert blas_threads.set_threads(1) is None
        return
    try:
        assert blas_threads.set_threads(1) == before
        assert blas_threads.get_threads() == 1
        a = np.arange(64, dtype=np.float64).reshape(8, 8)
        assert np.allclose(a @ np.eye(8), a)
    finally:
        blas_threads.set_threads(before)
    assert blas_threads.get_threads() == before


def test_a_count_below_one_is_refused():
    try:
        blas_threads.set_threads(0)
    except ValueError:
        return
    raise AssertionError("set_threads(0) was accepted")


def test_single_threaded_nests_and_restores():
    before = blas_threads.get_threads()
    with blas_threads.single_threaded():
        with blas_threads.single_threaded():
            assert blas_threads.get_threads() in (1, None)
        assert blas_threads.get_threads() in (1, None)
    assert blas_threads.get_threads() == before


def test_a_count_set_inside_the_context_applies_when_it_exits():
    before = blas_threads.get_threads()
    if before is None:
        return
    try:
        with blas_threads.single_threaded():
            assert blas_threads.set_threads(1) == before
            assert blas_threads.get_threads() == 1
        assert blas_threads.get_threads() == 1  # the new baseline, not the saved count
    finally:
        blas_threads.set_threads(before)
