"""Pipe codec and the worker's integrity check (accelopt.sandbox.codec / .integrity)."""
import numpy as np

from accelopt.sandbox import codec, integrity


def test_arrays_and_scalars_round_trip_as_fresh_copies():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = codec.decode(codec.encode(a))
    assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b)
    assert not np.shares_memory(a, b) and b.flags.writeable
    assert codec.decode(codec.encode(3.5)) == 3.5 and codec.decode(codec.encode(7)) == 7
    nan = codec.decode(codec.encode(float("nan")))
    assert np.isnan(nan)
    scalar = codec.decode(codec.encode(np.float32(2.0)))
    assert isinstance(scalar, np.float32)
    assert codec.digest(a) == codec.digest(a.copy()) != codec.digest(a * 2)
    assert codec.digest(1.0) == ""


def test_object_arrays_and_other_values_are_refused():
    for value in (np.array([object()]), "text", {"a": 1}):
        try:
            codec.encode(value)
        except codec.CodecError:
            continue
        raise AssertionError(f"encoded {value!r}")


def test_integrity_detects_patches_and_stashes_but_not_data_or_submodules():
    before = integrity.snapshot()
    assert integrity.compare(before) == []
    saved = np.allclose
    try:
        np.allclose = lambda *a, **k: True
        np.accelopt_test_stash = {}
        changes = integrity.compare(before)
        assert any("numpy.allclose" in c for c in changes), changes
        assert any("numpy.accelopt_test_stash was added" in c for c in changes), changes
    finally:
        np.allclose = saved
        del np.accelopt_test_stash
    assert integrity.compare(before) == []
