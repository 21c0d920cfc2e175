"""Per-op conformance against NumPy statements of the documented semantics (nki-facts §2.5, 2.6)."""
import numpy as np

from emulator.emu_helpers import rand
import nki_emu
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from nki_emu import dtypes


def _eval(body, *args):
    return nki_emu.run(body, list(args), trace=False).outputs


def _out(shape):
    return nl.ndarray(shape, dtype=np.float32, buffer=nl.shared_hbm)


def test_activation_scale_bias_per_partition():
    def k(x, s, b):
        o = _out(x.shape)
        nl.store(o, nisa.activation(op=nl.exp, data=nl.load(x), bias=nl.load(b), scale=nl.load(s)))
        return o
    x, s, b = rand(64, 32), rand(64, 1, seed=1), rand(64, 1, seed=2)
    assert np.allclose(_eval(k, x, s, b), np.exp(x * s + b), rtol=1e-6)


def test_tensor_scalar_reverse_and_two_ops():
    def k(x):
        o = _out(x.shape)
        nl.store(o, nisa.tensor_scalar(nl.load(x), op0=nl.subtract, operand0=2.0, reverse0=True,
                                       op1=nl.maximum, operand1=0.5))
        return o
    x = rand(16, 8)
    assert np.allclose(_eval(k, x), np.maximum(2.0 - x, 0.5))


def test_tensor_tensor_scan_recurrence():
    def k(a, b):
        o = _out(a.shape)
        nl.store(o, nisa.tensor_tensor_scan(nl.load(a), nl.load(b), initial=0.5, op0=np.multiply, op1=np.add))
        return o
    a, b = rand(8, 16), rand(8, 16, seed=3)
    ref, prev = np.empty_like(a), np.full(8, 0.5, np.float32)
    for i in range(16):
        prev = a[:, i] * prev + b[:, i]
        ref[:, i] = prev
    assert np.allclose(_eval(k, a, b), ref, rtol=1e-5)


def test_tensor_reduce_negate_and_nl_sum_rank1_as_p1():
    def k(x):
        o = _out((x.shape[0], 2))
        t = nl.load(x)
        s = nl.sum(t, axis=[1])
        assert s.shape == (x.shape[0], 1)
        nl.store(o[nl.arange(x.shape[0])[:, None], nl.arange(1)[None, :]], s)
        nl.store(o[nl.arange(x.shape[0])[:, None], 1 + nl.arange(1)[None, :]],
                 nisa.tensor_reduce(nl.max, data=t, axis=[1], negate=True))
        return o
    x = rand(32, 64)
    out = _eval(k, x)
    assert np.allclose(out[:, 0], x.sum(1), rtol=1e-5) and np.allclose(out[:, 1], -x.max(1))


def test_nc_matmul_and_transpose_against_identity():
    def k(a, b):
        o1, o2 = _out((64, 256)), _out((64, 128))
        ident = nl.load(nl.shared_constant(np.identity(128, dtype=np.float32)))
        ta = nl.load(a)
        nl.store(o1, nl.copy(nisa.nc_matmul(ta, nl.load(b))))
        nl.store(o2, nl.copy(nisa.nc_matmul(ta, ident, is_transpose=True, is_moving_onezero=True)))
        return o1, o2
    a, b = rand(128, 64), rand(128, 256, seed=4)
    o1, o2 = _eval(k, a, b)
    assert np.allclose(o1, a.T @ b, rtol=1e-4, atol=1e-4) and np.array_equal(o2, a.T)


def test_psum_accumulation_and_masked_matmul_columns():
    def k(a, b):
        o = _out((128, 512))
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for i in nl.affine_range(2):
            acc[nl.arange(128)[:, None], nl.arange(512)[None, :]] += nisa.nc_matmul(
                nl.load(a[i]), nl.load(b[i]), mask=(nl.arange(512)[None, :] < 300))
        nl.store(o, nl.copy(acc))
        return o
    a, b = rand(2, 128, 128), rand(2, 128, 512, seed=5)
    ref = a[0].T @ b[0] + a[1].T @ b[1]
    out = _eval(k, a, b)
    assert np.allclose(out[:, :300], ref[:, :300], rtol=1e-4, atol=1e-3) and np.all(out[:, 300:] == 0)


def test_three_d_arange_load_into_flattened_free_index():
    def k(x):
        o = _out((128, 1024))
        t = nl.ndarray((2, nl.par_dim(128), 1024), dtype=np.float32, buffer=nl.sbuf)
        t[1, nl.arange(128)[:, None, None], 128 * nl.arange(8)[None, :, None] + nl.arange(128)[None, None, :]] = \
            nl.load(x[nl.arange(128)[:, None, None], nl.arange(8)[None, :, None], nl.arange(128)[None, None, :]])
        nl.store(o, t[1, nl.arange(128)[:, None], nl.arange(1024)[None, :]])
        return o
    x = rand(128, 8, 128)
    assert np.array_equal(_eval(k, x), x.reshape(128, 1024))


def test_partition_offset_view_and_python_range():
    def k(x):
        o = _out(x.shape)
        lo = nl.arange(32)[:, None] + 32
        for off in range(0, 64, 32):
            t = nl.ndarray((64, 32), dtype=np.float32, buffer=nl.sbuf)
            t[nl.arange(64)[:, None], nl.arange(32)[None, :]] = nl.load(x[nl.arange(64)[:, None], off + nl.arange(32)[None, :]])
            nl.store(o[nl.arange(32)[:, None], off + nl.arange(32)[None, :]], nl.copy(t[lo, nl.arange(32)[None, :]]))
            nl.store(o[lo, off + nl.arange(32)[None, :]], nl.copy(t[nl.arange(32)[:, None], nl.arange(32)[None, :]]))
        return o
    x = rand(64, 64)
    assert np.array_equal(_eval(k, x), np.concatenate([x[32:], x[:32]]))


def test_mgrid_and_operators():
    def k(x):
        o = _out(x.shape)
        i_p, i_f = nl.mgrid[0:16, 0:8]
        t = nl.load(x[i_p, i_f])
        nl.store(o[i_p, i_f], (t * 2.0 + t) / 3.0 - t + 1.0)
        return o
    x = rand(16, 8)
    assert np.allclose(_eval(k, x), np.ones_like(x), atol=1e-6)


def test_bf16_rounding_is_nearest_even():
    vals = np.array([1.0, 1.00390625, 1.01171875, 3.14159265], np.float32)
    out = dtypes.round_to(vals, dtypes.bfloat16)
    assert list(out) == [1.0, 1.0, 1.015625, 3.140625]


def test_module_aliases_resolve():
    import importlib
    for name in ("neuronxcc.nki", "neuronxcc.nki.language", "neuronxcc.nki.isa", "neuronxcc.nki.typing",
                 "nki", "nki.language", "nki.isa", "nki.typing"):
        assert importlib.import_module(name) is not None
    from neuronxcc.nki import trace  # noqa: F401
    from neuronxcc.nki.language import par_dim
    assert par_dim(128).size == 128


def test_low_precision_dtypes_are_visible_in_kernel_results():
    def k(x, w):
        o = nl.ndarray((128, 512), dtype=np.float32, buffer=nl.shared_hbm)
        xb = nl.load(x, dtype=LOW)  # cast on load
        wb = nl.load(w, dtype=LOW)
        p = nisa.nc_matmul(xb, wb)  # fp32 accumulation of low-precision inputs
        nl.store(o, nl.copy(p, dtype=np.float32))
        return o
    x, w = rand(128, 128), rand(128, 512, seed=1)
    ref = x.astype(np.float64).T @ w.astype(np.float64)
    errs = {}
    global LOW
    for LOW in (np.float32, nl.bfloat16, np.float16):
        out = nki_emu.run(k, [x, w], trace=False).outputs
        errs[str(LOW)] = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    e32, ebf, e16 = errs.values()
    assert e32 < 1e-6 < e16 < 1e-3 < ebf < 1e-2, errs
    assert nl.bfloat16 is nki_emu.dtypes.bfloat16


LOW = np.float32


def test_block_dim_tensors_are_lazy_and_adopted_blocks_copy_on_write():
    from nki_emu.tensor import NkiTensor, blocks_of

    def k(x):
        o = nl.ndarray((4, 128, 64), dtype=np.float32, buffer=nl.shared_hbm)
        buf = nl.ndarray((1000, 4, nl.par_dim(128), 64), dtype=np.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            t = nl.exp(nl.load(x[i]))
            buf[7, i, nl.arange(128)[:, None], nl.arange(64)[None, :]] = t  # whole block: adopted
            buf[7, i, nl.arange(128)[:, None], nl.arange(64)[None, :]] += 1.0  # COW: t keeps exp(x)
            nl.store(o[i], nl.subtract(buf[7, i, nl.arange(128)[:, None], nl.arange(64)[None, :]], t))
        assert isinstance(buf, NkiTensor) and len(blocks_of(buf)) == 4  # 4 of 4000 blocks allocated
        return o
    x = rand(4, 128, 64)
    out = nki_emu.run(k, [x], trace=False).outputs
    assert np.allclose(out, 1.0, atol=1e-6)


def test_mask_that_holds_everywhere_or_nowhere_is_decided_without_arrays():
    # Predicate.constant must agree with the evaluated mask whenever it decides.
    from nki_emu.index_expr import arange, mask_array
    rng = np.random.default_rng(3)
    p, f = arange(128)[:, None], arange(512)[None, :]
    decided = 0
    for _ in range(400):
        a, b, c = (int(x) for x in rng.integers(-600, 600, size=3))
        sa, sb = (int(x) for x in rng.choice([-2, -1, 0, 1, 2], size=2))
        leaf1 = sa * p + c >= 0 if rng.random() < 0.5 else sb * f + a < b
        leaf2 = f + a != b if rng.random() < 0.3 else p - a <= b
        pred = [leaf1, leaf1 & leaf2, leaf1 | leaf2, ~leaf1][int(rng.integers(4))]
        full = pred.evaluate((128, 512))
        verdict = pred.constant((128, 512))
        if verdict is not None:
            decided += 1
            assert full.all() if verdict else not full.any()
        assert (mask_array(pred, (128, 512)) is None) == bool(full.all())
    assert decided > 100
    tail = -512 * 3 - f + 1983 >= 0  # a tail tile: the last 64 of its 512 columns are masked off
    assert tail.constant((128, 512)) is None and mask_array(tail, (128, 512)).sum() == 128 * 448
    assert (-512 * 2 - f + 1983 >= 0).constant((128, 512)) is True  # a full tile of the same loop
