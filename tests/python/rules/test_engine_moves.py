"""Rules ``scale_to_activation``, ``dedupe_load`` and ``retile``."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

RMS = H.kernel_source('''
    @nki.jit
    def kernel(x):
        M, N = x.shape
        TILE_M = 128
        out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // TILE_M):
            x_t = nl.load(x[i * TILE_M:(i + 1) * TILE_M, 0:N])
            ss = nl.sum(nl.square(x_t), axis=[1])
            r = nl.rsqrt(ss / N)
            x_again = nl.load(x[i * TILE_M:(i + 1) * TILE_M, 0:N])
            y = nl.multiply(x_again, r)
            nl.store(out[i * TILE_M:(i + 1) * TILE_M, 0:N], value=y)
        return out
''')


def _ref():
    return H.reference("x", "x / np.sqrt(np.mean(x * x, axis=1, keepdims=True))", [(256, 512)])


def test_dedupe_load_reads_the_first_tile():
    new, before, after = H.check(RMS, _ref(), "dedupe_load", faster=False)
    assert "x_again" not in new and "y = nl.multiply(x_t, r)" in new, new
    # the emulator already serves a re-load of resident data from SBUF (nki-facts §3.4, hoisted_loads);
    # the rewrite issues no such load at all
    m0, m1 = H.run(RMS, _ref())["metrics"], H.run(new, _ref())["metrics"]
    assert m1["dma_count"] + m1["hoisted_loads"] < m0["dma_count"] + m0["hoisted_loads"], (m0, m1)
    assert after <= before * 1.0001, (before, after)
    # the first tile is rebound in between: not the same data
    H.not_applicable(H.edit(RMS, "        x_again", "        x_t = nl.exp(x_t)\n        x_again"),
                     "dedupe_load")


def test_scale_to_activation_uses_the_row_statistic_as_scale():
    new, _b, _a = H.check(RMS, _ref(), "scale_to_activation", faster=False)
    assert "y = nisa.activation(op=nl.copy, data=x_again, scale=r)" in new, new
    # a full tile is not a (P, 1) column: refused
    H.not_applicable(H.edit(RMS, "nl.multiply(x_again, r)", "nl.multiply(x_again, x_t)"), "scale_to_activation")


def test_retile_proposes_partition_limited_values():
    ids = sorted(p["id"] for p in H.plans(RMS, "retile"))
    assert ids == ["retile:TILE_M=64"], ids  # TILE_M is a partition size: at most 128
    new, _b, _a = H.check(RMS, _ref(), "retile", faster=False)
    assert "TILE_M = 64" in new
    literal = H.edit(RMS, "for i in nl.affine_range(M // TILE_M):", "for i in nl.affine_range(2):")
    H.not_applicable(literal, "retile")  # the loop does not follow the tile size
