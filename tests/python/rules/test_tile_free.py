"""Rule ``tile_free``: a loop body over a long free dimension processed in chunks, scan state carried."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

KERNEL = H.kernel_source('''
    import numpy as np


    @nki.jit
    def kernel(x, a, b):
        C, L = x.shape
        S = b.shape[0]
        out = nl.ndarray((C, L), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((nl.par_dim(128), L), dtype=x.dtype)
        x_t = nl.load(x[0:128, 0:L])
        for s in nl.affine_range(S):
            a_s = nl.load(a[0:128, s])
            da = nisa.activation(op=nl.sigmoid, data=x_t, scale=a_s)
            b_s = nl.load(b[s:s + 1, 0:L])
            db = nisa.tensor_tensor(x_t, b_s.broadcast_to((128, L)), op=nl.multiply)
            h = nisa.tensor_tensor_scan(da, db, initial=0, op0=np.multiply, op1=np.add)
            acc[0:128, 0:L] += h
        nl.store(out[0:128, 0:L], acc[0:128, 0:L])
        return out
''')

# h_t = sigmoid(x_t a_s) h_{t-1} + x_t b_{s,t}, summed over s (a small, stable mamba), in NumPy
CODE = ("sum(np.stack(__import__('functools').reduce(lambda hs, t: hs + [hs[-1] / (1 + np.exp(-x[:, t] * a[:, s])) "
        "+ x[:, t] * b[s, t]], range(x.shape[1]), [np.zeros(x.shape[0], np.float32)])[1:], axis=1) "
        "for s in range(a.shape[1]))")


def test_tile_free_chunks_the_scan_and_stays_correct():
    ref = H.reference("x, a, b", CODE, [(128, 1024), (128, 2), (2, 1024)])
    sites = sorted(p["id"] for p in H.plans(KERNEL, "tile_free"))
    assert sites == ["tile_free:L/1024@s", "tile_free:L/2048@s", "tile_free:L/512@s"], sites
    new, before, after = H.check(KERNEL, ref, "tile_free", faster=False, site="L/512@s")
    assert "for L_t in nl.static_range(L // 512):" in new, new
    assert "da = nisa.activation(op=nl.sigmoid, data=x_t[:, L_0:L_0 + 512], scale=a_s)" in new, new
    assert "initial=h_carry" in new and "h_carry[...] = nl.copy(h[:, 512 - 1:512])" in new, new
    # the chunk size must divide the extent: the kernel's own assert refuses 2048 > 1024
    bad, _ = H.rewrite(KERNEL, "tile_free", "L/2048@s")
    assert H.run(bad, ref)["correct"] is False


def test_tile_free_keeps_a_later_front_statement_before_the_chunks():
    # x_t is loaded inside the loop (chunked) before a_s (stays in front): the chunk loop follows a_s
    inside = H.edit(H.edit(KERNEL, "    x_t = nl.load(x[0:128, 0:L])\n", ""), "        a_s = nl.load(a[0:128, s])",
                    "        x_t = nl.load(x[0:128, 0:L])\n        a_s = nl.load(a[0:128, s])")
    ref = H.reference("x, a, b", CODE, [(128, 1024), (128, 2), (2, 1024)])
    new, _b, _a = H.check(inside, ref, "tile_free", faster=False, site="L/512@s")
    lines = [ln.strip() for ln in new.splitlines()]
    assert lines.index("a_s = nl.load(a[0:128, s])") < lines.index("for L_t in nl.static_range(L // 512):"), new
    assert "x_t = nl.load(x[0:128, L_0:L_0 + 512])" in lines, new


def test_tile_free_refusals():
    # a reduction along the free dimension cannot be chunked
    H.not_applicable(H.edit(KERNEL, "acc[0:128, 0:L] += h", "acc[0:128, 0:L] += nl.sum(h, axis=[1])"), "tile_free")
    # a scan that already has a state, or a tile used after the loop
    H.not_applicable(H.edit(KERNEL, "initial=0", "initial=a_s"), "tile_free")
    H.not_applicable(H.edit(KERNEL, "    nl.store(out", "    nl.store(out[0:128, 0:1], h[0:128, 0:1])\n"
                            "    nl.store(out"), "tile_free")
