"""accelopt.sandbox.draw_store: published draws kept on disk between host processes."""
import os
import tempfile

import numpy as np

from accelopt import loading
from accelopt.sandbox import draw_store, draws

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


class _Store:
    """Points the store at a fresh temporary folder for the test's duration."""

    def __enter__(self):
        self.folder = tempfile.TemporaryDirectory()
        self.saved = os.environ.get(draw_store.ENV)
        os.environ[draw_store.ENV] = self.folder.name
        return self.folder.name

    def __exit__(self, *exc):
        if self.saved is None:
            os.environ.pop(draw_store.ENV, None)
        else:
            os.environ[draw_store.ENV] = self.saved
        self.folder.cleanup()


def test_a_stored_draw_loads_read_only_as_forward_returned_it():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.arange(5, dtype=np.int64)
    with _Store():
        for key, expected in (("k1", a * 2), ("k2", (a * 2, b)), ("k3", [a, b])):
            assert draw_store.load(key, 7) is None
            assert draw_store.save(key, 7, [a, b], expected)
            inputs, loaded = draw_store.load(key, 7)
            assert type(loaded) is type(expected)
            assert all(np.array_equal(x, y) for x, y in zip(inputs, [a, b]))
            for x, y in zip(loaded if isinstance(loaded, (tuple, list)) else [loaded],
                            expected if isinstance(expected, (tuple, list)) else [expected]):
                assert np.array_equal(x, y) and x.dtype == y.dtype and not x.flags.writeable
        assert draw_store.load("k1", 8) is None  # another seed
        assert not draw_store.save("k4", 7, [a, 3.0], a)  # not every input is an array: not stored
        assert not draw_store.save("k5", 7, [a], (a, 1.5))
        assert draw_store.load("k4", 7) is None


def test_the_store_can_be_turned_off_and_keeps_to_its_budget():
    a = np.zeros(1000, np.float32)
    saved = os.environ.get(draw_store.ENV)
    os.environ[draw_store.ENV] = "0"
    try:
        assert draw_store.root() is None and not draw_store.save("k", 0, [a], a) and draw_store.load("k", 0) is None
    finally:
        if saved is None:
            os.environ.pop(draw_store.ENV, None)
        else:
            os.environ[draw_store.ENV] = saved
    with _Store() as folder:
        for seed in range(4):
            assert draw_store.save("k", seed, [a], a)
            os.utime(draw_store._entry("k", seed), (seed + 1, seed + 1))
        draw_store._trim(folder, budget=2 * 8400)  # two entries of ~8.3 kB fit
        left = sorted(seed for seed in range(4) if draw_store.load("k", seed) is not None)
        assert left == [2, 3], left
    with _Store() as folder:
        # the time an entry saves per byte decides first: a costly small draw outlives a cheap
        # large one used more recently (rope's inputs against bmm's outputs)
        big = np.zeros(4096, np.float64)
        assert draw_store.save("rope", 0, [a], a, cost_ms=2000.0)
        assert draw_store.save("bmm", 0, [big], big, cost_ms=500.0)
        assert draw_store.save("old", 0, [a], a)  # no recorded cost: saves nothing
        os.utime(draw_store._entry("rope", 0), (1, 1))
        draw_store._trim(folder, budget=2 * 8400 + 4096 * 8 * 2 - 1)  # not all three fit
        assert draw_store.load("old", 0) is None
        assert draw_store.load("rope", 0) is not None
        draw_store._trim(folder, budget=2 * 8400)
        assert draw_store.load("rope", 0) is not None and draw_store.load("bmm", 0) is None


def test_published_draws_come_from_the_store_the_second_time():
    reference = loading.load_reference(os.path.join(FIXTURES, "ref_tiny.py"))
    saved_ms = draw_store.MIN_DRAW_MS
    draw_store.MIN_DRAW_MS = 0.0
    try:
        with _Store():
            first = draws.published(reference, 21, "refkey")
            assert first.store_key == ("refkey", 21)
            first.start(reference)
            expected = first.expected()
            draws.settle_store()
            again = draws.published(reference, 21, "refkey")
            assert again.done() and again.reference_ms == 0.0 and again.store_key is None
            assert np.array_equal(again.expected(), expected) and np.array_equal(again.nki_inputs[0],
                                                                                first.nki_inputs[0])
            assert again.digest(0) == first.digest(0) and again.norms() == first.norms()
    finally:
        draw_store.MIN_DRAW_MS = saved_ms


def test_large_draws_on_disk_are_not_kept_in_memory_between_calls():
    from accelopt.sandbox import trusted
    reference = loading.load_reference(os.path.join(FIXTURES, "ref_tiny.py"))
    saved = draw_store.MIN_DRAW_MS, trusted.LARGE_DRAW_BYTES
    draw_store.MIN_DRAW_MS, trusted.LARGE_DRAW_BYTES = 0.0, 0
    trusted.DRAWS.clear()
    try:
        with _Store():
            drawn, hit = trusted._cached_draw(reference, "bigkey", 3, True)
            assert not hit and drawn.kept_on_disk()
            drawn.expected()
            draws.settle_store()
            assert drawn.from_store and trusted.DRAWS.stats()["entries"] == 0  # dropped once computed
            again, hit = trusted._cached_draw(reference, "bigkey", 3, True)
            assert not hit and again.from_store and again.done() and trusted.DRAWS.stats()["entries"] == 0
            trusted.LARGE_DRAW_BYTES = 1 << 30  # small draws stay in memory
            kept, _ = trusted._cached_draw(reference, "bigkey", 4, True)
            kept.expected()
            draws.settle_store()
            assert trusted.DRAWS.stats()["entries"] == 1
    finally:
        draw_store.MIN_DRAW_MS, trusted.LARGE_DRAW_BYTES = saved
        trusted.DRAWS.clear()
