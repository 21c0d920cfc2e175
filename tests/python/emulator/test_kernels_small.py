"""Small kernels in the styles of the published NKIBench kernels (nki-facts §1.1, 1.4)."""
import numpy as np

from emulator.emu_helpers import rand, rel_l2
import nki_emu
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def _silu_generated(v1):
    import numpy as np
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl
    import neuronxcc.nki.isa as nisa
    from neuronxcc.nki import trace  # noqa: F401
    from neuronxcc.nki.language import par_dim  # noqa: F401
    v2 = nl.ndarray((128, 2, 1024), dtype=np.float32, buffer=nl.shared_hbm)
    v3 = nl.ndarray((nl.par_dim(128), 1), dtype=np.float32, name='memset', buffer=nl.sbuf)
    v4 = nl.ndarray((2, 2, nl.par_dim(128), 512), dtype=np.float32, name='x', buffer=nl.sbuf)
    v6 = nl.ndarray((2, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.sbuf)
    v7 = nl.ndarray((2, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.sbuf)
    v8 = nl.ndarray((2, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.sbuf)
    v5 = nl.ndarray((2, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.sbuf)
    v3[nl.arange(128)[:, None], 0] = nisa.memset(shape=(128, 1), value=np.dtype(np.uint16).type(0), dtype=np.float32, mask=None, engine=nki.isa.unknown_engine)
    for i0 in nl.affine_range(2):
        for i1 in nl.affine_range(2):
            v4[i0, i1, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nl.load(v1[nl.arange(128)[:, None], i0, nl.arange(512)[None, :] + 512 * i1], dtype=np.float32, mask=None)
            v6[i0, i1, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.activation(op=nl.exp, data=v4[i0, i1, nl.arange(128)[:, None], nl.arange(512)[None, :]], bias=v3[nl.arange(128)[:, None], 0], scale=-1.0, mask=None, dtype=np.float32)
            v7[i0, i1, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.tensor_scalar(data=v6[i0, i1, nl.arange(128)[:, None], nl.arange(512)[None, :]], op0=nl.add, operand0=np.dtype(np.float32).type(1), reverse0=True, dtype=np.float32, mask=None, engine=nki.isa.unknown_engine)
            v8[i0, i1, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.reciprocal(data=v7[i0, i1, nl.arange(128)[:, None], nl.arange(512)[None, :]], mask=None, dtype=np.float32)
            v5[i0, i1, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nl.multiply(v4[i0, i1, nl.arange(128)[:, None], nl.arange(512)[None, :]], v8[i0, i1, nl.arange(128)[:, None], nl.arange(512)[None, :]], mask=None, dtype=np.float32)
            nl.store(v2[nl.arange(128)[:, None], i0, nl.arange(512)[None, :] + 512 * i1], value=v5[i0, i1, nl.arange(128)[:, None], nl.arange(512)[None, :]], mask=None)
            ' end loop i1 '
    return v2


def test_silu_generated_style_five_seeds():
    for seed in (0, 21, 42, 63, 84):
        x = rand(256, 1024, seed=seed)
        out = _silu_generated(x.reshape(128, 2, 1024))
        assert rel_l2(out, x / (1 + np.exp(-x))) < 2e-5


@nki.jit
def _matmul_generated(v1, v2):
    """M=256, K=256, N=1024 in the generated style: 3-D arange loads, transposes, PSUM +=."""
    import numpy as np
    import neuronxcc.nki.language as nl
    import neuronxcc.nki.isa as nisa
    v3 = nl.ndarray((2, 128, 1024), dtype=np.float32, buffer=nl.shared_hbm)
    v4 = nl.shared_constant(np.identity(128, dtype=np.float32))
    v5 = nl.ndarray((nl.par_dim(128), 128), dtype=np.float32, name='identity', buffer=nl.sbuf)
    v6 = nl.ndarray((2, nl.par_dim(128), 1024), dtype=np.float32, name='rhs', buffer=nl.sbuf)
    v7 = nl.ndarray((2, nl.par_dim(128), 256), dtype=np.float32, name='', buffer=nl.sbuf)
    v8 = nl.zeros((2, 2, nl.par_dim(128), 128), dtype=np.float32, name='', buffer=nl.psum, lazy_initialization=True)
    v9 = nl.ndarray((2, nl.par_dim(128), 2, 128), dtype=np.float32, name='', buffer=nl.sbuf)
    v10 = nl.zeros((2, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.psum, lazy_initialization=True)
    v11 = nl.ndarray((2, nl.par_dim(128), 1024), dtype=np.float32, name='', buffer=nl.sbuf)
    v5[nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(v4[nl.arange(128)[:, None], nl.arange(128)[None, :]], dtype=np.float32, mask=None)
    for i2 in nl.affine_range(2):
        v6[i2, nl.arange(128)[:, None], nl.arange(1024)[None, :]] = nl.load(v2[i2, nl.arange(128)[:, None], nl.arange(1024)[None, :]], dtype=np.float32, mask=None)
    for i3 in nl.affine_range(2):
        v7[i3, nl.arange(128)[:, None, None], 128 * nl.arange(2)[None, :, None] + nl.arange(128)[None, None, :]] = nl.load(v1[i3, nl.arange(128)[:, None, None], nl.arange(2)[None, :, None], nl.arange(128)[None, None, :]], dtype=np.float32, mask=None)
        for i5 in nl.affine_range(2):
            v8[i3, i5, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nisa.nc_matmul(v7[i3, nl.arange(128)[:, None], 128 * i5 + nl.arange(128)[None, :]], v5[nl.arange(128)[:, None], nl.arange(128)[None, :]], is_stationary_onezero=False, is_moving_onezero=True, mask=None, is_transpose=True)
            v9[i3, nl.arange(128)[:, None], i5, nl.arange(128)[None, :]] = nl.copy(v8[i3, i5, nl.arange(128)[:, None], nl.arange(128)[None, :]], dtype=np.float32, mask=None)
        for i6 in nl.affine_range(2):
            for i8 in nl.affine_range(2):
                v10[i3, i6, nl.arange(128)[:, None], nl.arange(512)[None, :]] += nisa.nc_matmul(v9[i3, nl.arange(128)[:, None], i8, nl.arange(128)[None, :]], v6[i8, nl.arange(128)[:, None], 512 * i6 + nl.arange(512)[None, :]], is_stationary_onezero=False, is_moving_onezero=False, mask=None)
            v11[i3, nl.arange(128)[:, None], 512 * i6 + nl.arange(512)[None, :]] = nl.copy(v10[i3, i6, nl.arange(128)[:, None], nl.arange(512)[None, :]], dtype=np.float32, mask=None)
        nl.store(v3[i3, nl.arange(128)[:, None], nl.arange(1024)[None, :]], value=v11[i3, nl.arange(128)[:, None], nl.arange(1024)[None, :]], mask=None)
    return v3


def test_matmul_generated_style_five_seeds():
    for seed in (0, 21, 42, 63, 84):
        a, b = rand(256, 256, seed=seed), rand(256, 1024, seed=seed + 1)
        res = nki_emu.run(_matmul_generated, [a.reshape(2, 128, 2, 128), b.reshape(2, 128, 1024)])
        assert rel_l2(res.outputs, a @ b) < 2e-5
        assert res.profile["latency_ms"] > 0


@nki.jit
def _add_rmsnorm_matmul(x_tensor, w_tensor, eps, z_tensor, g_tensor):
    """Hand-written style (arm): slices, nl.matmul, nl.sum, rsqrt, broadcast_to, reshape."""
    M, K = x_tensor.shape
    N = w_tensor.shape[1]
    assert g_tensor.shape == (K,)
    ix = nl.arange(128)[:, None]
    iw = nl.arange(1)[:, None]
    iy = nl.arange(K)[None, :]
    iz = nl.arange(512)[None, :]
    result = nl.ndarray((M, N), dtype=x_tensor.dtype, buffer=nl.shared_hbm)
    g_tile = nl.load(g_tensor.reshape((1, K))[iw, iy])
    for i in nl.affine_range(M // 128):
        x_tile = nl.load(x_tensor[i * 128 + ix, iy])
        z_tile = nl.load(z_tensor[i * 128 + ix, iy])
        a_tile = nl.add(x_tile, z_tile)
        square_sum = nl.sum(nl.square(a_tile), axis=[1])
        mean = square_sum / K
        mean = nl.add(mean, eps)
        out_tile = nl.multiply(a_tile, nl.rsqrt(mean))
        out_tile[...] = nl.multiply(out_tile, g_tile.broadcast_to((128, K)))
        for n in nl.affine_range(N // 512):
            res_psum = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                w_tile = nl.load(w_tensor[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                res_psum += nl.matmul(out_tile[:, k * 128:(k + 1) * 128], w_tile)
            nl.store(result[i * 128 + ix, n * 512 + iz], value=nl.copy(res_psum, dtype=result.dtype))
    return result


def test_add_rmsnorm_matmul_hand_written_style_five_seeds():
    for seed in (0, 21, 42, 63, 84):
        x, z, w, g = rand(256, 256, seed=seed), rand(256, 256, seed=seed + 1), rand(256, 512, seed=seed + 2), rand(256, seed=seed + 3)
        y = x + z
        t = np.sum(np.square(y) / 256, axis=-1, keepdims=True) + 1e-5
        ref = (y / np.sqrt(t) * g) @ w
        out = _add_rmsnorm_matmul(x, w, 1e-5, z, g)
        assert rel_l2(out, ref) < 2e-5


@nki.jit
def _rmsnorm_loop_reduce(v1):
    """rmsnorm_matmul idioms: tensor_reduce + loop_reduce into an ndarray, (P,1) operands."""
    import numpy as np
    v2 = nl.ndarray((128, 1024), dtype=np.float32, buffer=nl.shared_hbm)
    v4 = nl.ndarray((nl.par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
    v7 = nl.ndarray((nl.par_dim(128), 1024), dtype=np.float32, buffer=nl.sbuf)
    v8 = nl.ndarray((nl.par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
    v9 = nl.ndarray((nl.par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
    v17 = nl.ndarray((2, nl.par_dim(128), 512), dtype=np.float32, buffer=nl.sbuf)
    v19 = nl.ndarray((2, nl.par_dim(128), 1), dtype=np.float32, buffer=nl.sbuf)
    v11 = nl.ndarray((nl.par_dim(128), 1024), dtype=np.float32, buffer=nl.sbuf)
    v4[nl.arange(128)[:, None], 0] = nisa.memset(shape=(128, 1), value=0, dtype=np.float32)
    v7[nl.arange(128)[:, None], nl.arange(1024)[None, :]] = nl.load(v1[nl.arange(128)[:, None], nl.arange(1024)[None, :]])
    for i2 in nl.affine_range(2):
        v17[i2, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.activation(op=nl.square, data=v7[nl.arange(128)[:, None], 512 * i2 + nl.arange(512)[None, :]], bias=v4[nl.arange(128)[:, None], 0], scale=1.0)
        v19[i2, nl.arange(128)[:, None], 0] = nisa.tensor_reduce(nl.add, data=v17[i2, nl.arange(128)[:, None], nl.arange(512)[None, :]], axis=[1], dtype=np.float32, negate=False)
        v8[nl.arange(128)[:, None], 0] = nl.loop_reduce(v19[i2, nl.arange(128)[:, None], 0], op=np.add, loop_indices=[i2], mask=None, dtype=np.float32)
    v9[nl.arange(128)[:, None], 0] = nisa.activation(op=nl.rsqrt, data=v8[nl.arange(128)[:, None], 0], scale=1.0 / 1024)
    for i3 in nl.affine_range(2):
        v11[nl.arange(128)[:, None], 512 * i3 + nl.arange(512)[None, :]] = nisa.tensor_scalar(data=v7[nl.arange(128)[:, None], 512 * i3 + nl.arange(512)[None, :]], op0=nl.multiply, operand0=v9[nl.arange(128)[:, None], 0], reverse0=False, engine=nki.isa.unknown_engine)
    nl.store(v2[nl.arange(128)[:, None], nl.arange(1024)[None, :]], value=v11[nl.arange(128)[:, None], nl.arange(1024)[None, :]])
    return v2


def test_rmsnorm_loop_reduce_style():
    x = rand(128, 1024)
    ref = x / np.sqrt(np.mean(x * x, axis=1, keepdims=True))
    assert rel_l2(_rmsnorm_loop_reduce(x), ref) < 2e-5
