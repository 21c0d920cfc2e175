"""Coverage by NaN sentinel (nki_emu.sentinel, nki_emu.tensor): an uninitialised float HBM
tensor keeps no written-element mask, yet the coverage rule answers exactly as a mask
does: same count, first index and message, also when a kernel stores the sentinel itself
(copying unwritten memory), for views, masked and indirect stores, batched runs, and
outputs counted in several chunks."""
import numpy as np

from emulator.emu_helpers import rand
import nki_emu
import neuronxcc.nki.language as nl
from nki_emu import sentinel, tensor
from nki_emu.errors import UnwrittenOutputError


def _refused(kernel, *args):
    try:
        nki_emu.run(kernel, list(args), trace=False)
    except UnwrittenOutputError as exc:
        return exc
    raise AssertionError(f"{kernel.__name__} was not refused as unwritten_output")


def _written_state(shape, dtype, fill=None):
    return tensor._written_of(tensor.NkiTensor.allocate(shape, dtype, "shared_hbm", fill=fill))


def test_only_uninitialised_float_hbm_tensors_go_without_a_mask():
    assert _written_state((4, 4), np.float32) is tensor.BY_SENTINEL
    assert _written_state((4, 4), nl.bfloat16) is tensor.BY_SENTINEL  # float32 storage
    assert _written_state((4, 4), np.float16) is tensor.BY_SENTINEL
    for dtype, fill in ((np.int32, None), (np.float32, 0.0), (np.uint8, None)):
        state = _written_state((4, 4), dtype, fill)
        assert isinstance(state, np.ndarray) and state.dtype == np.bool_ and not state.any(), (dtype, fill)


def test_the_sentinel_is_a_nan_numpy_never_makes():
    for dtype in (np.float16, np.float32, np.float64):
        value = sentinel.fill_value(dtype)
        assert np.isnan(value)
        canonical = np.array(np.nan, dtype)
        assert not sentinel.holds(canonical) and sentinel.holds(np.array([1, value], dtype))
        assert not sentinel.holds(np.array([1, value], dtype), where=np.array([True, False]))


def test_storing_unwritten_memory_counts_as_written_exactly_as_with_a_mask():
    def copies_garbage(x):
        scratch = nl.ndarray((8, 8), dtype=x.dtype, buffer=nl.shared_hbm)  # never written
        out = nl.ndarray((8, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out[0:4, 0:8], value=nl.load(scratch[0:4, 0:8]))  # stores the sentinel itself
        nl.store(out[4:6, 0:8], value=nl.load(x[4:6, 0:8]))
        return out
    err = _refused(copies_garbage, rand(8, 8))
    assert (err.output, err.missing, err.total, err.first) == (0, 16, 64, (6, 0)), (err.missing, err.first)
    assert "16 of 64 elements were never written" in str(err) and "[6, 0]" in str(err)

    def copies_then_completes(x):
        scratch = nl.ndarray((8, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        out = nl.ndarray((8, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        out[0:8, 0:8] = nl.load(scratch)
        out[2:3, 0:8] += nl.load(x[2:3, 0:8])  # NaN + x keeps the sentinel's payload
        return out
    result = nki_emu.run(copies_then_completes, [rand(8, 8)], trace=False)
    assert np.isnan(result.outputs).all()  # written (with unwritten memory's NaN): no refusal


def test_masked_and_view_outputs_count_like_a_mask():
    def masked(x):
        out = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.arange(128)[:, None], nl.arange(8)[None, :]
        nl.store(out[i_p, i_f], value=nl.load(x[i_p, i_f]), mask=(i_f < 7))
        return out[0:128, 2:8]
    err = _refused(masked, rand(128, 8))
    assert (err.missing, err.total, err.first) == (128, 768, (0, 5))


def test_counting_in_chunks_finds_the_first_unwritten_element():
    saved = sentinel.CHUNK_ELEMENTS
    sentinel.CHUNK_ELEMENTS = 40  # 5 rows of 8 per step: the holes lie in later chunks

    def holes(x):
        out = nl.ndarray((64, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out[0:37, 0:8], value=nl.load(x[0:37, 0:8]))
        nl.store(out[37:38, 0:3], value=nl.load(x[37:38, 0:3]))
        nl.store(out[38:64, 0:8], value=nl.load(x[38:64, 0:8]))
        out[50:51, 0:8] = nl.load(x[50:51, 0:8])
        return out
    try:
        err = _refused(holes, rand(64, 8))
    finally:
        sentinel.CHUNK_ELEMENTS = saved
    assert (err.missing, err.first) == (5, (37, 3))


def test_missing_counts_every_member_and_any_shape():
    data = np.ones((2, 3, 5), np.float32)
    data[1, 2, 4] = sentinel.fill_value(np.float32)
    data[0, 1, 0] = sentinel.fill_value(np.float32)
    assert sentinel.missing(data) == (2, (1, 0))
    assert sentinel.missing(np.ones((1, 7), np.float16)) == (0, None)
    mask = sentinel.mask_from(data)
    assert mask.shape == (2, 3, 5) and mask.sum() == 28  # the members differ: per member
    assert sentinel.mask_from(data[:1]).shape == (3, 5)


def test_batched_runs_report_what_each_set_alone_reports():
    def partial(x):
        out = nl.ndarray((8, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out[0:5, 0:8], value=nl.load(x[0:5, 0:8]))
        nl.store(out[5:8, 1:8], value=nl.load(x[5:8, 1:8]))
        return out
    single = _refused(partial, rand(8, 8))
    try:
        nki_emu.run_batched(partial, [[rand(8, 8, seed=s)] for s in range(3)])
    except UnwrittenOutputError as err:
        assert err.uniform is True and (err.missing, err.total, err.first) == (3, 64, (5, 0))
        assert (single.missing, single.total, single.first) == (3, 64, (5, 0))
    else:
        raise AssertionError("expected unwritten_output")


def test_indirect_stores_per_member_count_per_member():
    def indirect(x, idx):
        out = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        ids = nl.load(idx)
        nl.store(out[ids[nl.arange(3)[:, None], 0], nl.arange(8)[None, :]], value=nl.load(x[0:3, 0:8]))
        return out
    full = np.array([[0], [1], [2]], np.int32)
    sets = [[rand(4, 8, seed=1), np.array([[0], [1], [3]], np.int32)],
            [rand(4, 8, seed=2), np.array([[3], [1], [2]], np.int32)]]
    try:
        nki_emu.run_batched(indirect, sets)
    except UnwrittenOutputError as err:
        assert err.uniform is False  # the members wrote different rows
        assert (err.missing, err.first) == (16, (0, 0))  # rows 0 and 2: unwritten in some member
    else:
        raise AssertionError("expected unwritten_output")
    err = _refused(indirect, rand(4, 8), full)
    assert (err.missing, err.first) == (8, (3, 0))
