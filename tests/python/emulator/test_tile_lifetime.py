"""Tile lifetime (nki_emu.tensor.NkiTensor.root, nki_emu.cost.tracer.Tracer.flush): a tile
the kernel no longer references is freed by reference counting alone, traced or not, so
an emulated kernel holds only its live tiles (issue 14: mamba kept ~150 dead 3.5 MB tiles,
+0.5 GB per input set, while they waited for the cyclic garbage collector)."""
import gc
import weakref

import numpy as np

from emulator.emu_helpers import rand
import nki_emu
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from nki_emu import tensor

ITERATIONS = 6


def _tiles_alive():
    return sum(1 for o in gc.get_objects() if isinstance(o, tensor.NkiTensor))


def _loop_kernel(x):
    """Six loop iterations of load -> two element-wise ops -> accumulate; stores the sum."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros(x.shape, dtype=x.dtype)
    for _ in nl.sequential_range(ITERATIONS):
        t = nl.load(x)
        e = nisa.activation(op=nl.exp, data=t)
        acc += nisa.tensor_tensor(e, t, op=nl.multiply)
    nl.store(out, acc)
    return out


def _run_without_collector(trace):
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        before = _tiles_alive()
        result = nki_emu.run(_loop_kernel, [rand(128, 64)], trace=trace)
        after = _tiles_alive()
    finally:
        if enabled:
            gc.enable()
    return result, before, after


def test_dead_tiles_freed_without_the_cyclic_collector_when_traced():
    result, before, after = _run_without_collector(trace=True)
    assert result.profile.get("latency_ms", 0) > 0
    assert after == before, f"{after - before} tiles outlived the traced run (reference cycles)"


def test_dead_tiles_freed_without_the_cyclic_collector_untraced():
    _result, before, after = _run_without_collector(trace=False)
    assert after == before, f"{after - before} tiles outlived the run (reference cycles)"


def test_root_is_itself_and_a_view_names_its_root():
    t = tensor.NkiTensor.fresh(np.zeros((1, 128, 4), np.float32), np.float32)
    view = t[0:64, 0:2]
    assert t.root is t and view.root is t and view.root is not view
    ref = weakref.ref(t)
    del t
    assert ref() is not None  # the view keeps its root alive
    del view
    assert ref() is None  # freed at once, no collection needed (no self-reference)
