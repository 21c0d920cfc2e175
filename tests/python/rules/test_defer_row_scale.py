"""Rule ``defer_row_scale``: RMSNorm's row scale moves from before the transposes to the PSUM eviction."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

# RMSNorm + matmul written the way neuronxcc emits it (the published rmsnorm_matmul's structure, small):
# x (2 row tiles x 128, K = 256) is normalized per row, transposed on TensorE, and multiplied by w (K x 512)
KERNEL = H.kernel_source('''
    import numpy as np


    @nki.jit
    def kernel(v1, v2):
        v3 = nl.ndarray((2, 128, 512), dtype=np.float32, buffer=nl.shared_hbm)
        v5 = nl.shared_constant(np.identity(128, dtype=np.float32))
        v6 = nl.ndarray((nl.par_dim(128), 128), dtype=np.float32, name='identity', buffer=nl.sbuf)
        v7 = nl.ndarray((2, nl.par_dim(128), 256), dtype=np.float32, name='x_local', buffer=nl.sbuf)
        v17 = nl.ndarray((2, nl.par_dim(128), 256), dtype=np.float32, name='', buffer=nl.sbuf)
        v8 = nl.ndarray((2, nl.par_dim(128), 1), dtype=np.float32, name='', buffer=nl.sbuf)
        v9 = nl.ndarray((2, nl.par_dim(128), 1), dtype=np.float32, name='', buffer=nl.sbuf)
        v11 = nl.ndarray((2, nl.par_dim(128), 256), dtype=np.float32, name='', buffer=nl.sbuf)
        v12 = nl.zeros((2, 2, nl.par_dim(128), 128), dtype=np.float32, name='', buffer=nl.psum)
        v13 = nl.ndarray((2, 2, nl.par_dim(128), 128), dtype=np.float32, name='x_t', buffer=nl.sbuf)
        v14 = nl.ndarray((2, nl.par_dim(128), 512), dtype=np.float32, name='w_local', buffer=nl.sbuf)
        v15 = nl.zeros((2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.psum)
        v16 = nl.ndarray((2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.sbuf)
        v6[nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(v5[nl.arange(128)[:, None], nl.arange(128)[None, :]], dtype=np.float32, mask=None)
        for i0 in nl.affine_range(2):
            v7[i0, nl.arange(128)[:, None], nl.arange(256)[None, :]] = nl.load(v1[i0, nl.arange(128)[:, None], nl.arange(256)[None, :]], dtype=np.float32, mask=None)
            v17[i0, nl.arange(128)[:, None], nl.arange(256)[None, :]] = nisa.activation(op=nl.square, data=v7[i0, nl.arange(128)[:, None], nl.arange(256)[None, :]], dtype=np.float32)
            v8[i0, nl.arange(128)[:, None], 0] = nisa.tensor_reduce(nl.add, data=v17[i0, nl.arange(128)[:, None], nl.arange(256)[None, :]], axis=[1], dtype=np.float32)
            v9[i0, nl.arange(128)[:, None], 0] = nisa.activation(op=nl.rsqrt, data=v8[i0, nl.arange(128)[:, None], 0], scale=0.00390625, dtype=np.float32)
            v11[i0, nl.arange(128)[:, None], nl.arange(256)[None, :]] = nisa.tensor_scalar(data=v7[i0, nl.arange(128)[:, None], nl.arange(256)[None, :]], op0=nl.multiply, operand0=v9[i0, nl.arange(128)[:, None], 0], reverse0=False, dtype=np.float32, mask=None)
            for i4 in nl.affine_range(2):
                v12[i0, i4, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nisa.nc_matmul(v11[i0, nl.arange(128)[:, None], 128 * i4 + nl.arange(128)[None, :]], v6[nl.arange(128)[:, None], nl.arange(128)[None, :]], is_moving_onezero=True, is_transpose=True)
                v13[i4, i0, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.copy(v12[i0, i4, nl.arange(128)[:, None], nl.arange(128)[None, :]], dtype=np.float32)
        for i6 in nl.affine_range(2):
            v14[i6, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nl.load(v2[i6, nl.arange(128)[:, None], nl.arange(512)[None, :]], dtype=np.float32)
        for i8 in nl.affine_range(2):
            for i10 in nl.affine_range(2):
                v15[i8, nl.arange(128)[:, None], nl.arange(512)[None, :]] += nisa.nc_matmul(v13[i10, i8, nl.arange(128)[:, None], nl.arange(128)[None, :]], v14[i10, nl.arange(128)[:, None], nl.arange(512)[None, :]])
            v16[i8, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nl.copy(v15[i8, nl.arange(128)[:, None], nl.arange(512)[None, :]], dtype=np.float32)
            nl.store(v3[i8, nl.arange(128)[:, None], nl.arange(512)[None, :]], value=v16[i8, nl.arange(128)[:, None], nl.arange(512)[None, :]])
        return v3
''')

FORWARD = ("((x.reshape(256, 256) / np.sqrt(np.mean(np.square(x.reshape(256, 256)), axis=1, keepdims=True)))"
           " @ w.reshape(256, 512)).reshape(2, 128, 512)")


def test_defer_row_scale_is_correct_and_drops_the_vector_pass():
    ref = H.reference("x, w", FORWARD, [(2, 128, 256), (2, 128, 512)])
    assert [p["id"] for p in H.plans(KERNEL, "defer_row_scale")] == ["defer_row_scale:v11->v16"]
    new, before, after = H.check(KERNEL, ref, "defer_row_scale", faster=False)
    # the transposes read the loaded tile; the scale (row block i8 of the output = row block i0 of x) is
    # applied when the accumulated tile leaves PSUM
    assert "nisa.nc_matmul(v7[i0, nl.arange(128)[:, None], 128 * i4 + nl.arange(128)[None, :]], v6[" in new, new
    assert "v16[i8, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.tensor_scalar(data=v15[i8, " \
           "nl.arange(128)[:, None], nl.arange(512)[None, :]], op0=nl.multiply, " \
           "operand0=v9[i8, nl.arange(128)[:, None], 0])" in new, new
    assert "v11" not in new, new
    metrics_before = H.run(KERNEL, ref)["metrics"]
    metrics_after = H.run(new, ref)["metrics"]
    assert metrics_after["instruction_count"] < metrics_before["instruction_count"]
    assert metrics_after["engine_busy_ms"]["vector"] + metrics_after["engine_busy_ms"]["scalar"] < \
        metrics_before["engine_busy_ms"]["vector"] + metrics_before["engine_busy_ms"]["scalar"]
    assert after <= before * 1.01, (before, after)


def test_defer_row_scale_refuses_when_the_chain_breaks():
    # the scaled tile is also stored: it is no longer only the transposes' input
    stored = H.edit(KERNEL, "    for i6 in nl.affine_range(2):\n",
                    "    nl.store(v3[0, nl.arange(128)[:, None], nl.arange(256)[None, :]], "
                    "value=v11[0, nl.arange(128)[:, None], nl.arange(256)[None, :]])\n"
                    "    for i6 in nl.affine_range(2):\n")
    H.not_applicable(stored, "defer_row_scale")
    # the statistic is picked by a variable that is no row block of the scaled tile (here the K block)
    per_k = H.edit(KERNEL, "operand0=v9[i0, nl.arange(128)[:, None], 0]", "operand0=v9[i4, nl.arange(128)[:, None], 0]")
    H.not_applicable(per_k, "defer_row_scale")
    # an add instead of a multiply does not commute with the matmul
    add = H.edit(KERNEL, "op0=nl.multiply, operand0=v9", "op0=nl.add, operand0=v9")
    H.not_applicable(add, "defer_row_scale")
    # the eviction already does something else with the tile
    scaled = H.edit(KERNEL, "= nl.copy(v15[i8, nl.arange(128)[:, None], nl.arange(512)[None, :]], dtype=np.float32)",
                    "= nisa.activation(op=nl.exp, data=v15[i8, nl.arange(128)[:, None], nl.arange(512)[None, :]])")
    H.not_applicable(scaled, "defer_row_scale")


# the hand-written form (the published add_rmsnorm_matmul's structure, small): nl.matmul transposes the
# normalized row block itself
NAMED = H.kernel_source('''
    @nki.jit
    def kernel(x, w, g):
        M, K = x.shape
        _, N = w.shape
        out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
        g_t = nl.load(g.reshape((1, K))[nl.arange(1)[:, None], nl.arange(K)[None, :]])
        for i in nl.affine_range(M // 128):
            a_t = nl.load(x[i * 128:(i + 1) * 128, 0:K])
            sq = nl.square(a_t)
            mean = nl.sum(sq, axis=[1]) / K
            r = nl.rsqrt(mean)
            y = nl.multiply(a_t, r)
            y[...] = nl.multiply(y, g_t.broadcast_to((128, K)))
            for n in nl.affine_range(N // 512):
                acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
                for k in nl.affine_range(K // 128):
                    w_t = nl.load(w[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                    acc += nl.matmul(y[:, k * 128:(k + 1) * 128], w_t)
                res = nl.copy(acc, dtype=out.dtype)
                nl.store(out[i * 128:(i + 1) * 128, n * 512:(n + 1) * 512], value=res)
        return out
''')

NAMED_FORWARD = "(x / np.sqrt(np.mean(np.square(x), axis=1, keepdims=True)) * g) @ w"


def test_defer_row_scale_named_form_is_correct_also_after_hoist_transpose():
    ref = H.reference("x, w, g", NAMED_FORWARD, [(256, 256), (256, 1024), (256,)])
    new, before, after = H.check(NAMED, ref, "defer_row_scale", faster=False)
    assert "        y = a_t\n" in new, new
    assert "res = nisa.tensor_scalar(data=acc, op0=nl.multiply, operand0=r, dtype=out.dtype)" in new, new
    assert after <= before * 1.01, (before, after)
    # after hoist_transpose the rows reach the matmul through the transposed copy yT
    hoisted, _ = H.rewrite(NAMED, "hoist_transpose")
    new2, before2, after2 = H.check(hoisted, ref, "defer_row_scale", faster=False)
    assert "        y = a_t\n" in new2 and "operand0=r, dtype=out.dtype)" in new2, new2
    assert after2 <= before2 * 1.01, (before2, after2)


def test_defer_row_scale_named_form_refuses():
    # an add after the scale does not commute with it
    add = H.edit(NAMED, "y[...] = nl.multiply(y, g_t", "y[...] = nl.add(y, g_t")
    H.not_applicable(add, "defer_row_scale")
    # a_t is read after the multiply: y may not alias it
    reread = H.edit(NAMED, "            res = nl.copy(acc, dtype=out.dtype)\n",
                    "            res = nl.copy(acc, dtype=out.dtype)\n"
                    "            nl.store(out[i * 128:(i + 1) * 128, 0:K], value=a_t)\n")
    H.not_applicable(reread, "defer_row_scale")
    # the scaled rows are also stored directly
    stored = H.edit(NAMED, "        for n in nl.affine_range(N // 512):\n",
                    "        nl.store(out[i * 128:(i + 1) * 128, 0:K], value=y)\n"
                    "        for n in nl.affine_range(N // 512):\n")
    H.not_applicable(stored, "defer_row_scale")
    # the statistic is no (P, 1) column
    wide = H.edit(NAMED, "r = nl.rsqrt(mean)", "r = nl.rsqrt(sq)")
    H.not_applicable(wide, "defer_row_scale")
