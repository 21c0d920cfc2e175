"""Pipe codec and the worker's integrity check (accelopt.sandbox.codec / .integrity)."""
import numpy as np

from accelopt.sandbox import codec, integrity


def _round_trip(value):
    blobs = []
    descriptor = codec.encode(value, blobs)
    return codec.decode(descriptor, [bytes(b) for b in blobs]), descriptor, blobs


def test_arrays_and_scalars_round_trip_as_fresh_copies():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b, descriptor, blobs = _round_trip(a)
    assert descriptor == {"blob": 0, "dtype": "<f4", "shape": [3, 4]} and len(blobs) == 1
    assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b)
    assert not np.shares_memory(a, b) and b.flags.writeable
    assert _round_trip(3.5)[0] == 3.5 and _round_trip(7)[0] == 7 and _round_trip(7)[2] == []
    assert np.isnan(_round_trip(float("nan"))[0])
    scalar = _round_trip(np.float32(2.0))[0]
    assert isinstance(scalar, np.float32)
    transposed = _round_trip(a.T)[0]  # a non-contiguous view travels in C order
    assert np.array_equal(transposed, a.T)
    empty = _round_trip(np.zeros((0, 5), np.float64))[0]
    assert empty.shape == (0, 5)
    assert codec.digest(a) == codec.digest(a.copy()) != codec.digest(a * 2)
    assert codec.digest(1.0) == ""


def test_object_arrays_and_other_values_are_refused():
    for value in (np.array([object()]), "text", {"a": 1}, np.zeros(2, dtype=[("x", "<f4")])):
        try:
            codec.encode(value, [])
        except codec.CodecError:
            continue
        raise AssertionError(f"encoded {value!r}")


def test_malformed_descriptors_are_refused():
    blob = [np.zeros(4, np.float32).tobytes()]
    for descriptor in ({"blob": 0, "dtype": "<f4", "shape": [5]},       # size does not match
                       {"blob": 1, "dtype": "<f4", "shape": [4]},       # no such attachment
                       {"blob": 0, "dtype": "|O", "shape": [2]},        # object dtype
                       {"blob": 0, "dtype": "<f4", "shape": [-4]},
                       {"blob": 0, "dtype": "<f4"},
                       {"py": "text"}, "raw"):
        try:
            codec.decode(descriptor, blob)
        except codec.CodecError:
            continue
        raise AssertionError(f"decoded {descriptor!r}")


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


def test_integrity_compares_identities_not_equality():
    class Liar:
        def __eq__(self, other):
            return True

        def __hash__(self):
            return 0

        def __call__(self, *args, **kwargs):
            return True

    before = integrity.snapshot()
    saved = np.allclose
    try:
        np.allclose = Liar()
        assert any("numpy.allclose" in c for c in integrity.compare(before))
    finally:
        np.allclose = saved
    import json
    code = json.dumps.__code__
    try:
        json.dumps.__code__ = (lambda *a, **k: "{}").__code__
        assert any("json.dumps" in c and "code" in c for c in integrity.compare(before))
    finally:
        json.dumps.__code__ = code
    assert integrity.compare(before) == []


def test_content_digests_catch_in_place_edits_of_the_cost_model():
    import importlib
    for name in ("targets", "formulas", "scheduler", "tracer", "residency", "metrics"):
        importlib.import_module("nki_emu.cost." + name)
    from nki_emu.cost import targets
    before = integrity.content_digests()
    assert "nki_emu.cost.targets" in before and "nki_emu.cost.scheduler" in before
    assert integrity.compare_digests(before) == []
    saved = targets.TRN1.clock_ghz["tensor"]
    try:
        targets.TRN1.clock_ghz["tensor"] = 1000.0  # same dict, same dataclass: identity sees nothing
        assert integrity.compare_digests(before) == [
            "nki_emu.cost.targets changed in place (content digest differs)"]
    finally:
        targets.TRN1.clock_ghz["tensor"] = saved
    assert integrity.compare_digests(before) == []


def test_content_digests_see_function_defaults_and_closures():
    from nki_emu.cost import scheduler
    before = integrity.content_digests()
    functions = [v for v in vars(scheduler).values()
                 if isinstance(v, type(test_content_digests_see_function_defaults_and_closures))
                 and v.__module__ == scheduler.__name__]
    assert functions
    fn = functions[0]
    saved = fn.__kwdefaults__
    try:
        fn.__kwdefaults__ = {"injected": 1}
        assert integrity.compare_digests(before)
    finally:
        fn.__kwdefaults__ = saved
    assert integrity.compare_digests(before) == []


def test_content_watch_records_every_mutable_place_the_digest_reads():
    # The worker's C++ content check (host/src/worker/content_check.h) reads these records
    # instead of hashing; a W_UNCHECKABLE one would send every candidate back to the digest.
    import importlib
    for name in ("targets", "formulas", "scheduler", "tracer", "residency", "metrics"):
        importlib.import_module("nki_emu.cost." + name)
    from nki_emu.cost import targets
    before = integrity.content_digests()
    watch = integrity.content_watch()
    assert integrity.content_digests() == before  # recording reads, never edits
    kinds = {record[0] for record in watch}
    assert integrity.W_UNCHECKABLE not in kinds
    assert {integrity.W_MODULE, integrity.W_DICT, integrity.W_FUNCTION, integrity.W_TYPE, integrity.W_OBJECT,
            integrity.W_SLOT} <= kinds
    watched = {id(record[1]) for record in watch}
    assert id(targets.TRN1.clock_ghz) in watched and id(vars(targets)) in watched
    assert {record[1] for record in watch if record[0] == integrity.W_MODULE} == set(before)
