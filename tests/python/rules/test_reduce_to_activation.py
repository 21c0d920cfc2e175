"""Rule ``reduce_to_activation``: a row sum of an activation's result computed by activation_reduce."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

# RMSNorm of a sum of two inputs (the published add_rmsnorm_matmul's prologue, small)
KERNEL = H.kernel_source('''
    @nki.jit
    def kernel(x, z):
        M, K = x.shape
        out = nl.ndarray((M, K), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // 128):
            x_t = nl.load(x[i * 128:(i + 1) * 128, 0:K])
            z_t = nl.load(z[i * 128:(i + 1) * 128, 0:K])
            a_t = nl.add(x_t, z_t)
            # square, then the row sums
            sq = nl.square(a_t)

            ssum = nl.sum(sq, axis=[1])
            r = nl.rsqrt(ssum / K)
            nl.store(out[i * 128:(i + 1) * 128, 0:K], value=nl.multiply(a_t, r))
        return out
''')

FORWARD = "(x + z) / np.sqrt(np.mean(np.square(x + z), axis=1, keepdims=True))"


def test_reduce_to_activation_is_correct_and_drops_the_vector_reduce():
    ref = H.reference("x, z", FORWARD, [(256, 512), (256, 512)])
    assert [p["id"] for p in H.plans(KERNEL, "reduce_to_activation")] == ["reduce_to_activation:ssum"]
    new, before, after = H.check(KERNEL, ref, "reduce_to_activation", faster=False)
    assert "        ssum = nl.ndarray((a_t.shape[0], 1), dtype=a_t.dtype, buffer=nl.sbuf)\n" \
           "        # square, then the row sums\n" \
           "        sq = nisa.activation_reduce(op=nl.square, data=a_t, reduce_op=nl.add, reduce_res=ssum)\n" in new, new
    assert "nl.sum" not in new, new
    m_before, m_after = H.run(KERNEL, ref)["metrics"], H.run(new, ref)["metrics"]
    assert m_after["engine_busy_ms"]["vector"] < m_before["engine_busy_ms"]["vector"], (m_before, m_after)
    assert m_after["instruction_count"] < m_before["instruction_count"]
    assert after <= before * 1.01, (before, after)


def test_reduce_to_activation_keeps_bias_and_scale_of_an_activation():
    src = H.edit(KERNEL, "sq = nl.square(a_t)", "sq = nisa.activation(op=nl.exp, data=a_t, scale=0.5)")
    ref = H.reference("x, z", "(x + z) / np.sqrt(np.mean(np.exp(0.5 * (x + z)), axis=1, keepdims=True))",
                      [(256, 512), (256, 512)])
    new, _, _ = H.check(src, ref, "reduce_to_activation", faster=False)
    assert "sq = nisa.activation_reduce(op=nl.exp, data=a_t, reduce_op=nl.add, reduce_res=ssum, scale=0.5)" in new


def test_reduce_to_activation_refuses():
    # a sum over a tile of unknown rank (a kernel argument's reshape) or along the partitions
    H.not_applicable(H.edit(KERNEL, "a_t = nl.add(x_t, z_t)", "a_t = nl.add(x_t, z_t.reshape((128, K)))"),
                     "reduce_to_activation")
    H.not_applicable(H.edit(KERNEL, "nl.sum(sq, axis=[1])", "nl.sum(sq, axis=[0])"), "reduce_to_activation")
    # sq is updated in place before the sum
    H.not_applicable(H.edit(KERNEL, "\n        ssum = nl.sum", "        sq[...] = nl.multiply(sq, 2.0)\n"
                            "        ssum = nl.sum"), "reduce_to_activation")
    # a max is no add
    H.not_applicable(H.edit(KERNEL, "nl.sum(sq, axis=[1])", "nl.max(sq, axis=[1])"), "reduce_to_activation")
