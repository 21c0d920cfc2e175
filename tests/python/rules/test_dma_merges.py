"""DMA merges on hand-written kernels: merge_stores and merge_loads' slice form (docs/rules.md)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

# rope-style: the two halves of each output tile are computed on 64 partitions each and stored apart
HALVES = H.kernel_source('''
    TILE = 512


    @nki.jit
    def kernel(x, c, s):
        D, T = x.shape
        H2 = D // 2
        out = nl.ndarray((D, T), dtype=x.dtype, buffer=nl.shared_hbm)
        for j in nl.affine_range(T // TILE):
            x_lo = nl.load(x[0:H2, j * TILE:(j + 1) * TILE])
            x_hi = nl.load(x[H2:D, j * TILE:(j + 1) * TILE])
            c_t = nl.load(c[0:H2, j * TILE:(j + 1) * TILE])
            s_t = nl.load(s[0:H2, j * TILE:(j + 1) * TILE])
            out_lo = nl.subtract(nl.multiply(x_lo, c_t), nl.multiply(x_hi, s_t))
            out_hi = nl.add(nl.multiply(x_lo, s_t), nl.multiply(x_hi, c_t))
            nl.store(out[0:H2, j * TILE:(j + 1) * TILE], value=out_lo)
            nl.store(out[H2:D, j * TILE:(j + 1) * TILE], value=out_hi)
        return out
''')
HALVES_REF = ("x, c, s", "np.concatenate([x[:64] * c - x[64:] * s, x[:64] * s + x[64:] * c])",
              [(128, 2048), (64, 2048), (64, 2048)])

# transpose_matmul-style: the stationary block is filled one 128 x 128 slice per load
SLICES = H.kernel_source('''
    P = 128


    def _block(lhs_blk, rhs, out, i, K):
        acc = nl.zeros((P, 512), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // P):
            rhs_tile = nl.load(rhs[k * P:(k + 1) * P, 0:512])
            acc += nisa.nc_matmul(lhs_blk[:, k * P:(k + 1) * P], rhs_tile)
        nl.store(out[i * P:(i + 1) * P, 0:512], value=nl.copy(acc, dtype=out.dtype))


    @nki.jit
    def kernel(lhs_t, rhs):
        K, M = lhs_t.shape
        out = nl.ndarray((M, 512), dtype=lhs_t.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // P):
            lhs_blk = nl.ndarray((P, K), dtype=lhs_t.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(K // P):
                lhs_blk[:, k * P:(k + 1) * P] = nl.load(lhs_t[k * P:(k + 1) * P, i * P:(i + 1) * P])
            _block(lhs_blk, rhs, out, i, K)
        return out
''')
SLICES_REF = ("a, b", "a.T @ b", [(512, 256), (512, 512)])


def test_merge_stores_one_store_over_both_halves_is_correct():
    ref = H.reference(*HALVES_REF)
    new, plan = H.rewrite(HALVES, "merge_stores")
    assert plan["params"]["site"] == "out_lo+out_hi"
    for text in ("assert D <= 128\n", "out_lo_hi = nl.ndarray((D, TILE), dtype=out.dtype, buffer=nl.sbuf)",
                 "out_lo_hi[0:H2, :] = nl.subtract(", "out_lo_hi[H2:D, :] = nl.add(",
                 "nl.store(out[0:D, j * TILE:(j + 1) * TILE], value=out_lo_hi)"):
        assert text in new, (text, new)
    assert new.count("nl.store(") == 1, new
    before = H.run(HALVES, ref)
    after = H.run(new, ref)
    H.ok(before)
    H.ok(after)
    assert after["metrics"]["dma_count"] < before["metrics"]["dma_count"], (before["metrics"], after["metrics"])


def test_merge_stores_refusals():
    # ranges that are not adjacent, different column ranges, a value read twice
    gap = H.edit(HALVES, "nl.store(out[H2:D,", "nl.store(out[H2 + 1:D,")
    cols = H.edit(HALVES, "nl.store(out[H2:D, j * TILE:(j + 1) * TILE]", "nl.store(out[H2:D, 0:TILE]")
    twice = H.edit(HALVES, "        nl.store(out[H2:D,", "        out_lo2 = nl.copy(out_lo)\n        nl.store(out[H2:D,")
    for bad in (gap, cols, twice):
        H.not_applicable(bad, "merge_stores")


def test_merge_loads_slices_of_a_stationary_block_is_correct():
    ref = H.reference(*SLICES_REF)
    assert [p["params"]["site"] for p in H.plans(SLICES, "merge_loads")] == ["lhs_blk@k"]
    new, _ = H.rewrite(SLICES, "merge_loads")
    assert "lhs_blk[nl.arange(P)[:, None, None], P * nl.arange(K // P)[None, :, None] + nl.arange(P)[None, None, :]] = " \
           "nl.load(lhs_t[P * nl.arange(K // P)[None, :, None] + nl.arange(P)[:, None, None], i * P + " \
           "nl.arange(P)[None, None, :]])" in new, new
    assert new.count("for k in") == 1, new  # the helper's loop stays
    H.ok(H.run(new, ref))


def test_merge_loads_slices_refusals():
    # the block is read by VectorE in the helper: one DMA would hold it back
    vector = H.edit(SLICES, "nisa.nc_matmul(lhs_blk[:, k * P:(k + 1) * P], rhs_tile)",
                    "nisa.nc_matmul(nl.exp(lhs_blk[:, k * P:(k + 1) * P]), rhs_tile)")
    # the rhs tiles in the helper are name-bound per iteration, not slices of one tile: never merged
    assert [p["params"]["site"] for p in H.plans(SLICES, "merge_loads")] == ["lhs_blk@k"]
    H.not_applicable(vector, "merge_loads")
    # a source slice that is not the tile's partition count
    rows = H.edit(SLICES, "nl.load(lhs_t[k * P:(k + 1) * P, i * P:(i + 1) * P])",
                  "nl.load(lhs_t[k * 64:(k + 1) * 64, i * P:(i + 1) * P])")
    H.not_applicable(rows, "merge_loads")
