"""Rule ``widen_loop``: inner elementwise affine_range iterations merge into wider tiles."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

KERNEL = H.kernel_source('''
    W = 128


    @nki.jit
    def kernel(x):
        M, N = x.shape
        out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // 128):
            for j in nl.affine_range(N // W):
                t = nl.load(x[i * 128:(i + 1) * 128, j * W:(j + 1) * W])
                y = nisa.activation(op=nl.exp, data=t, scale=0.5)
                nl.store(out[i * 128:(i + 1) * 128, j * W:(j + 1) * W], value=nl.multiply(y, t))
        return out
''')


def test_widen_symbolic_trip_count_with_remainder():
    ref = H.reference("x", "np.exp(0.5 * x) * x", [(256, 384)])  # 3 tiles of 128: remainder needed
    new, before, after = H.check(KERNEL, ref, "widen_loop")
    assert "nl.affine_range((N // W) // 2)" in new and "nl.affine_range((N // W) % 2)" in new, new
    assert "j * (2 * W):(j + 1) * (2 * W)" in new


def test_widen_literal_trip_count_fully():
    src = H.edit(KERNEL, "nl.affine_range(N // W)", "nl.affine_range(4)")
    ref = H.reference("x", "np.exp(0.5 * x) * x", [(256, 512)])
    sites = sorted(p["params"]["site"] for p in H.plans(src, "widen_loop"))
    assert sites == ["j*2", "j*4"], sites
    new, before, after = H.check(src, ref, "widen_loop", site="j*4")
    assert "nl.affine_range(1)" in new and "j * (4 * W):(j + 1) * (4 * W)" in new, new
    assert "% 2" not in new  # a literal multiple needs no remainder loop


def test_widen_refuses_unsafe_bodies():
    reduced = H.edit(KERNEL, "value=nl.multiply(y, t))", "value=nl.sum(y, axis=[1], keepdims=True))")
    H.not_applicable(reduced, "widen_loop")  # a reduction over the free axis changes meaning
    matmul = H.edit(KERNEL, "y = nisa.activation(op=nl.exp, data=t, scale=0.5)",
                            "y = nisa.nc_matmul(t, t)")
    H.not_applicable(matmul, "widen_loop")  # matmul: moving/PSUM limits and semantics
    other_use = H.edit(KERNEL, "scale=0.5", "scale=float(j)")
    H.not_applicable(other_use, "widen_loop")  # j outside the j*W slices
    seq = H.edit(KERNEL, "nl.affine_range(N // W)", "nl.sequential_range(N // W)")
    H.not_applicable(seq, "widen_loop")  # sequential loops may carry dependencies
    partition = H.edit(KERNEL, "x[i * 128:(i + 1) * 128, j * W:(j + 1) * W]", "x[j * W:(j + 1) * W, 0:128]")
    H.not_applicable(partition, "widen_loop")  # a j-slice on the partition axis
    too_wide = H.edit(KERNEL, "W = 128", "W = 4096")
    H.not_applicable(too_wide, "widen_loop")  # 8192 elements per partition exceeds MAX_WIDTH
    outside_tile = H.edit(H.edit(KERNEL, "for j in nl.affine_range(N // W):",
                                 "c = nl.load(x[0:128, 0:W])\n        for j in nl.affine_range(N // W):"),
                          "nl.multiply(y, t)", "nl.multiply(y, c)")
    H.not_applicable(outside_tile, "widen_loop")  # a W-wide tile from outside would not widen
