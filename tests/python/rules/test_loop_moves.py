"""Rules ``interchange`` and ``hoist_invariant``: loop-invariant work moves out of loops."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

# mamba-like: the per-channel-tile loads do not depend on the state loop, which is outside
NEST = H.kernel_source('''
    @nki.jit
    def kernel(x, y, b):
        C, L = x.shape
        S, _ = b.shape
        out = nl.ndarray((C, L), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((C // 128, nl.par_dim(128), L), dtype=x.dtype)
        for s in nl.affine_range(S):
            for c in nl.affine_range(C // 128):
                c0 = c * 128
                x_t = nl.load(x[c0:c0 + 128, 0:L])
                y_t = nl.load(y[c0:c0 + 128, 0:L])
                xy = nisa.tensor_tensor(x_t, y_t, op=nl.multiply)
                b_t = nl.load(b[s:s + 1, 0:L])
                b_b = b_t.broadcast_to((128, L))
                acc[c, 0:128, 0:L] += nisa.tensor_tensor(xy, b_b, op=nl.multiply)
        for c in nl.affine_range(C // 128):
            c0 = c * 128
            nl.store(out[c0:c0 + 128, 0:L], acc[c, 0:128, 0:L])
        return out
''')


def test_interchange_hoists_the_channel_loads_and_is_faster():
    ref = H.reference("x, y, b", "x * y * b.sum(axis=0)", [(256, 512), (256, 512), (4, 512)])
    assert [p["id"] for p in H.plans(NEST, "interchange")] == ["interchange:s<->c"]
    new, before, after = H.check(NEST, ref, "interchange")
    lines = [ln.strip() for ln in new.splitlines()]
    outer = lines.index("for c in nl.affine_range(C // 128):")
    assert lines[outer + 1:outer + 6] == ["c0 = c * 128", "x_t = nl.load(x[c0:c0 + 128, 0:L])",
                                          "y_t = nl.load(y[c0:c0 + 128, 0:L])",
                                          "xy = nisa.tensor_tensor(x_t, y_t, op=nl.multiply)",
                                          "for s in nl.affine_range(S):"], new
    m0, m1 = H.run(NEST, ref)["metrics"], H.run(new, ref)["metrics"]
    issued = lambda m: m["dma_count"] + m["hoisted_loads"]  # noqa: E731 - loads in the trace
    assert issued(m1) < issued(m0), (m0, m1)
    assert m1["instruction_count"] < m0["instruction_count"], (m0, m1)  # x * y once per channel tile
    assert H.plans(new, "interchange") == []  # nothing left to hoist by swapping back


def test_interchange_refusals():
    # the inner trip count reads the outer variable
    H.not_applicable(H.edit(NEST, "for c in nl.affine_range(C // 128):\n            c0",
                            "for c in nl.affine_range(C // 128 + s * 0):\n            c0"), "interchange")
    # sequential outer loop: iterations may carry state
    H.not_applicable(H.edit(NEST, "for s in nl.affine_range(S):", "for s in nl.sequential_range(S):"),
                     "interchange")
    # every load depends on both loop variables: swapping hoists nothing
    both = H.edit(H.edit(NEST, "x[c0:c0 + 128, 0:L]", "x[c0:c0 + 128, s * 0:L + s * 0]"),
                  "y[c0:c0 + 128, 0:L]", "y[c0:c0 + 128, s * 0:L + s * 0]")
    H.not_applicable(both, "interchange")


def test_hoist_invariant_moves_the_broadcast_out():
    src = H.kernel_source('''
        @nki.jit
        def kernel(x, g):
            M, N = x.shape
            out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
            g_t = nl.load(g[0:1, 0:N])
            for i in nl.affine_range(M // 128):
                x_t = nl.load(x[i * 128:(i + 1) * 128, 0:N])
                # the broadcast is the same for every row block
                g_b = g_t.broadcast_to((128, N))
                nl.store(out[i * 128:(i + 1) * 128, 0:N], value=nl.multiply(x_t, g_b))
            return out
    ''')
    ref = H.reference("x, g", "x * g", [(512, 256), (1, 256)])
    new, before, after = H.check(src, ref, "hoist_invariant", faster=False)
    assert after <= before * 1.0001, (before, after)
    m0, m1 = H.run(src, ref)["metrics"], H.run(new, ref)["metrics"]
    assert m1["engine_busy_ms"]["tensor"] < m0["engine_busy_ms"]["tensor"], (m0, m1)  # one broadcast, not 4
    lines = new.splitlines()
    assert lines.index("    g_b = g_t.broadcast_to((128, N))") < lines.index("    for i in nl.affine_range(M // 128):")
    assert "    # the broadcast is the same for every row block" in lines
    # written in place inside the loop: not invariant
    H.not_applicable(H.edit(src, "        nl.store(out", "        g_b[0:1, 0:N] = x_t[0:1, 0:N]\n        nl.store(out"),
                     "hoist_invariant")
