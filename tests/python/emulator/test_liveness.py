"""Block liveness (nki_emu.liveness): dead blocks of block-dim buffers are freed, live ones never."""
import numpy as np

from emulator.emu_helpers import rand
import nki_emu
from nki_emu import liveness, tensor
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


def _per_iteration(v1):
    out = nl.ndarray((4, 128, 64), dtype=np.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((4, 2, nl.par_dim(128), 32), dtype=np.float32, buffer=nl.sbuf)
    y = nl.ndarray((2, 4, nl.par_dim(128), 32), dtype=np.float32, buffer=nl.sbuf)
    for i0 in nl.affine_range(4):
        for i1 in nl.affine_range(2):
            x[i0, i1, nl.arange(128)[:, None], nl.arange(32)[None, :]] = nl.load(
                v1[i0, nl.arange(128)[:, None], 32 * i1 + nl.arange(32)[None, :]])
            y[i1, i0, nl.arange(128)[:, None], nl.arange(32)[None, :]] = nl.multiply(
                x[i0, i1, nl.arange(128)[:, None], nl.arange(32)[None, :]], 2.0)
            nl.store(out[i0, nl.arange(128)[:, None], 32 * i1 + nl.arange(32)[None, :]],
                     value=y[i1, i0, nl.arange(128)[:, None], nl.arange(32)[None, :]] + 1.0)
    return out


def _carried_across_outer_loop(v1):
    # acc[i1] is read in iteration i0 + 1 before being written again: never dead per i1
    out = nl.ndarray((2, 128, 32), dtype=np.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((2, nl.par_dim(128), 32), dtype=np.float32, buffer=nl.sbuf)
    for i0 in nl.sequential_range(3):
        for i1 in nl.affine_range(2):
            acc[i1, nl.arange(128)[:, None], nl.arange(32)[None, :]] = nl.add(
                acc[i1, nl.arange(128)[:, None], nl.arange(32)[None, :]],
                nl.load(v1[i1, nl.arange(128)[:, None], nl.arange(32)[None, :]]))
    for i1 in nl.affine_range(2):
        nl.store(out[i1, nl.arange(128)[:, None], nl.arange(32)[None, :]],
                 value=acc[i1, nl.arange(128)[:, None], nl.arange(32)[None, :]])
    return out


def _view_kept_in_a_name(v1):
    out = nl.ndarray((2, 128, 32), dtype=np.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((2, nl.par_dim(128), 32), dtype=np.float32, buffer=nl.sbuf)
    for i0 in nl.affine_range(2):
        x[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]] = nl.load(
            v1[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]])
        view = x[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]]
        nl.store(out[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]], value=view)
    return out


def _used_whole(v1):
    out = nl.ndarray((2, 128, 32), dtype=np.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((2, nl.par_dim(128), 32), dtype=np.float32, buffer=nl.sbuf)
    for i0 in nl.affine_range(2):
        x[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]] = nl.load(
            v1[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]])
        nl.store(out[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]],
                 value=x[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]])
    assert x.shape == (2, 128, 32)
    return out


def _loop_index_reassigned(v1):
    out = nl.ndarray((2, 128, 32), dtype=np.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((2, nl.par_dim(128), 32), dtype=np.float32, buffer=nl.sbuf)
    for i0 in nl.affine_range(2):
        x[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]] = nl.load(
            v1[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]])
        i0 = 1 - i0
        nl.store(out[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]],
                 value=x[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]])
    return out


def _plan(kernel):
    return {name: slots for releases in liveness.analyse(kernel).values() for name, slots in releases}


def test_blocks_owned_by_one_iteration_are_planned_with_their_index_positions():
    plan = _plan(_per_iteration)
    assert plan == {"x": (("i0", 0), ("i1", 1)), "y": (("i0", 1), ("i1", 0))}
    lines = liveness.analyse(_per_iteration)
    first = _per_iteration.__code__.co_firstlineno
    # both are released by the inner loop (the deepest loop enclosing every use)
    assert list(lines) == [first + 5]


def test_a_block_read_in_a_later_iteration_of_an_outer_loop_is_not_planned():
    assert "acc" not in _plan(_carried_across_outer_loop)


def test_a_view_bound_to_a_name_or_a_whole_tensor_use_disqualifies_it():
    assert _plan(_view_kept_in_a_name) == {}
    assert _plan(_used_whole) == {}


def test_a_reassigned_loop_index_disqualifies_the_tensors_it_indexes():
    assert _plan(_loop_index_reassigned) == {}


def test_source_less_functions_are_not_analysed():
    namespace = {}
    exec("def k(a):\n    return a\n", namespace)
    assert liveness.analyse(namespace["k"]) == {}


def test_a_kernel_file_edited_after_import_is_not_analysed():
    import importlib.util
    import os
    import tempfile
    source = ("import numpy as np\nimport neuronxcc.nki.language as nl\n\n\n"
              "def k(v1):\n"
              "    out = nl.ndarray((2, 128, 32), dtype=np.float32, buffer=nl.shared_hbm)\n"
              "    {x} = nl.ndarray((2, nl.par_dim(128), 32), dtype=np.float32, buffer=nl.sbuf)\n"
              "    for i0 in nl.affine_range(2):\n"
              "        {x}[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]] = nl.load(\n"
              "            v1[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]])\n"
              "        nl.store(out[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]],\n"
              "                 value={x}[i0, nl.arange(128)[:, None], nl.arange(32)[None, :]])\n"
              "    return out\n")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "edited_kernel.py")
        with open(path, "w") as handle:
            handle.write(source.format(x="x"))
        spec = importlib.util.spec_from_file_location("edited_kernel", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert _plan(module.k) == {"x": (("i0", 0),)}
        with open(path, "w") as handle:  # same shape, other tensor name: the code still says "x"
            handle.write(source.format(x="renamed"))
        os.utime(path, (1, 1))  # a different mtime, so that linecache re-reads the file
        assert liveness.analyse(module.k) == {}


def _roots_during(kernel, args):
    roots = []
    allocate = tensor.NkiTensor.allocate.__func__

    def recording(cls, *a, **kw):
        t = allocate(cls, *a, **kw)
        roots.append(t)
        return t

    tensor.NkiTensor.allocate = classmethod(recording)
    try:
        outputs = nki_emu.run(nki.jit(kernel), args).outputs
    finally:
        tensor.NkiTensor.allocate = classmethod(allocate)
    return outputs, {t.name: t for t in roots if tensor.blocks_of(t) is not None and t.par_axis > 0}


def test_dead_blocks_are_freed_and_results_are_unchanged():
    a = rand(4, 128, 64)
    out, roots = _roots_during(_per_iteration, [a])
    np.testing.assert_allclose(out, a * 2.0 + 1.0, rtol=1e-6)
    block_roots = [t for t in roots.values() if t.layout.shape[-1] == 32]
    assert len(block_roots) == 2
    assert all(len(tensor.blocks_of(t)) == 0 for t in block_roots)  # every block freed after its iteration


def test_carried_blocks_stay_alive_and_accumulate_correctly():
    a = rand(2, 128, 32, seed=1)
    out, roots = _roots_during(_carried_across_outer_loop, [a])
    np.testing.assert_allclose(out, 3 * a, rtol=1e-5)
    assert any(len(tensor.blocks_of(t)) == 2 for t in roots.values())
