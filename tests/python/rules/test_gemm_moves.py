"""GEMM moves on compiler-style kernels: merge_loads, hoist_nest, split_block, reblock (docs/rules.md).

The kernels are written the way neuronxcc emits them (the published NKIBench
bmm / matmul / transpose_matmul style): block-dimension SBUF/PSUM tensors,
nl.arange indices, identity-matmul transposes, masked tails.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

# out = lhs^T @ rhs; lhs (K=2048, M=128) as (128, 16, 128), rhs (K, N=1984) as (128, 16, 1984):
# the K tiles of both operands are loaded one nl.load per block, N is walked in masked 1024-wide blocks
TMM = H.kernel_source('''
    import numpy as np


    @nki.jit
    def kernel(v1, v2):
        v3 = nl.ndarray((1, 128, 1984), dtype=np.float32, buffer=nl.shared_hbm)
        v4 = nl.ndarray((16, nl.par_dim(128), 128), dtype=np.float32, name='lhs_local', buffer=nl.sbuf)
        v5 = nl.ndarray((2, 16, nl.par_dim(128), 1024), dtype=np.float32, name='', buffer=nl.sbuf)
        v6 = nl.zeros((2, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.psum, lazy_initialization=True)
        v7 = nl.ndarray((2, nl.par_dim(128), 1024), dtype=np.float32, name='', buffer=nl.sbuf)
        for i1 in nl.affine_range(16):
            v4[i1, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(v1[nl.arange(128)[:, None], i1, nl.arange(128)[None, :]], dtype=np.float32, mask=None)
            ' end loop i1 '
        for i2 in nl.affine_range(2):
            for i3 in nl.affine_range(16):
                v5[i2, i3, nl.arange(128)[:, None], nl.arange(1024)[None, :]] = nl.load(v2[nl.arange(128)[:, None], i3, 1024 * i2 + nl.arange(1024)[None, :]], dtype=np.float32, mask=-1024 * i2 + -1 * nl.arange(1024)[None, :] + 1983 >= 0)
                ' end loop i3 '
            for i5 in nl.affine_range(2):
                for i6 in nl.affine_range(16):
                    v6[i2, i5, nl.arange(128)[:, None], nl.arange(512)[None, :]] += nisa.nc_matmul(v4[i6, nl.arange(128)[:, None], nl.arange(128)[None, :]], v5[i2, i6, nl.arange(128)[:, None], 512 * i5 + nl.arange(512)[None, :]], is_stationary_onezero=False, is_moving_onezero=False, mask=-512 * i5 + -1024 * i2 + -1 * nl.arange(512)[None, :] + 1983 >= 0)
                    ' end loop i6 '
                v7[i2, nl.arange(128)[:, None], 512 * i5 + nl.arange(512)[None, :]] = nl.copy(v6[i2, i5, nl.arange(128)[:, None], nl.arange(512)[None, :]], dtype=np.float32, mask=-512 * i5 + -1024 * i2 + -1 * nl.arange(512)[None, :] + 1983 >= 0)
                ' end loop i5 '
            nl.store(v3[0, nl.arange(128)[:, None], 1024 * i2 + nl.arange(1024)[None, :]], value=v7[i2, nl.arange(128)[:, None], nl.arange(1024)[None, :]], mask=-1024 * i2 + -1 * nl.arange(1024)[None, :] + 1983 >= 0)
            ' end loop i2 '
        return v3
''')
TMM_REF = ("a, b", 'np.einsum("pkm,pkn->mn", a, b)[None]', [(128, 16, 128), (128, 16, 1984)])

# out[b] = lhs[b] @ rhs[b]; lhs (2, 256, 64), rhs (2, 64, 1024); the lhs tiles are loaded and transposed
# (identity matmul) inside the loop over N blocks i1 although they do not depend on it
BMM = H.kernel_source('''
    import numpy as np


    @nki.jit
    def kernel(v1, v2):
        v3 = nl.ndarray((2, 2, 128, 1024), dtype=np.float32, buffer=nl.shared_hbm)
        v4 = nl.shared_constant(np.identity(128, dtype=np.float32))
        v5 = nl.ndarray((nl.par_dim(128), 128), dtype=np.float32, name='identity_local', buffer=nl.sbuf)
        v6 = nl.ndarray((2, 2, nl.par_dim(64), 512), dtype=np.float32, name='rhs_local', buffer=nl.sbuf)
        v7 = nl.ndarray((2, 2, 2, nl.par_dim(128), 64), dtype=np.float32, name='', buffer=nl.sbuf)
        v8 = nl.zeros((2, 2, 2, nl.par_dim(64), 128), dtype=np.float32, name='', buffer=nl.psum, lazy_initialization=True)
        v9 = nl.ndarray((2, 2, nl.par_dim(64), 256), dtype=np.float32, name='', buffer=nl.sbuf)
        v10 = nl.zeros((2, 2, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.psum, lazy_initialization=True)
        v11 = nl.ndarray((2, 2, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.sbuf)
        v5[nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(v4[nl.arange(128)[:, None], nl.arange(128)[None, :]], dtype=np.float32, mask=None)
        for i0 in nl.affine_range(2):
            for i1 in nl.affine_range(2):
                v6[i0, i1, nl.arange(64)[:, None], nl.arange(512)[None, :]] = nl.load(v2[i0, nl.arange(64)[:, None], 512 * i1 + nl.arange(512)[None, :]], dtype=np.float32, mask=None)
                for i3 in nl.affine_range(2):
                    v7[i1, i0, i3, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.load(v1[i0, 128 * i3 + nl.arange(128)[:, None], nl.arange(64)[None, :]], dtype=np.float32, mask=None)
                    v8[i0, i1, i3, nl.arange(64)[:, None], nl.arange(128)[None, :]] = nisa.nc_matmul(v7[i1, i0, i3, nl.arange(128)[:, None], nl.arange(64)[None, :]], v5[nl.arange(128)[:, None], nl.arange(128)[None, :]], is_stationary_onezero=False, is_moving_onezero=True, mask=None, is_transpose=True)
                    v9[i1, i0, nl.arange(64)[:, None], 128 * i3 + nl.arange(128)[None, :]] = nl.copy(v8[i0, i1, i3, nl.arange(64)[:, None], nl.arange(128)[None, :]], dtype=np.float32, mask=None)
                    ' end loop i3 '
                for i4 in nl.affine_range(2):
                    v10[i0, i1, i4, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.nc_matmul(v9[i1, i0, nl.arange(64)[:, None], 128 * i4 + nl.arange(128)[None, :]], v6[i0, i1, nl.arange(64)[:, None], nl.arange(512)[None, :]], is_stationary_onezero=False, is_moving_onezero=False, mask=None)
                    v11[i0, i1, i4, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nl.copy(v10[i0, i1, i4, nl.arange(128)[:, None], nl.arange(512)[None, :]], dtype=np.float32, mask=None)
                    nl.store(v3[i0, i4, nl.arange(128)[:, None], 512 * i1 + nl.arange(512)[None, :]], value=v11[i0, i1, i4, nl.arange(128)[:, None], nl.arange(512)[None, :]], mask=None)
                    ' end loop i4 '
                ' end loop i1 '
            ' end loop i0 '
        return v3
''')
BMM_REF = ("a, b", "np.matmul(a, b).reshape(2, 2, 128, 1024)", [(2, 256, 64), (2, 64, 1024)])

# a matmul-style rhs panel: per i0, 8 x 8 K tiles of a 512-wide block (128 KiB per partition)
PANEL = H.kernel_source('''
    import numpy as np


    @nki.jit
    def kernel(v1, v2):
        v3 = nl.ndarray((128, 1024), dtype=np.float32, buffer=nl.shared_hbm)
        v4 = nl.ndarray((8, 8, nl.par_dim(128), 128), dtype=np.float32, name='', buffer=nl.sbuf)
        v6 = nl.ndarray((2, 8, 8, nl.par_dim(128), 512), dtype=np.float32, name='rhs_local', buffer=nl.sbuf)
        v10 = nl.zeros((2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.psum, lazy_initialization=True)
        v11 = nl.ndarray((2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.sbuf)
        for i0 in nl.affine_range(2):
            for i1 in nl.affine_range(8):
                for i2 in nl.affine_range(8):
                    v6[i0, i1, i2, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nl.load(v2[i2 + 8 * i1, nl.arange(128)[:, None], nl.arange(512)[None, :] + 512 * i0], dtype=np.float32, mask=None)
            for i7 in nl.affine_range(8):
                for i8 in nl.affine_range(8):
                    v10[i0, nl.arange(128)[:, None], nl.arange(512)[None, :]] += nisa.nc_matmul(v4[i7, i8, nl.arange(128)[:, None], nl.arange(128)[None, :]], v6[i0, i7, i8, nl.arange(128)[:, None], nl.arange(512)[None, :]], is_stationary_onezero=False, is_moving_onezero=False, mask=None)
            v11[i0, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nl.copy(v10[i0, nl.arange(128)[:, None], nl.arange(512)[None, :]], dtype=np.float32, mask=None)
            nl.store(v3[nl.arange(128)[:, None], nl.arange(512)[None, :] + 512 * i0], value=v11[i0, nl.arange(128)[:, None], nl.arange(512)[None, :]], mask=None)
        return v3
''')


def _ids(source, rule):
    return sorted(p["params"]["site"] for p in H.plans(source, rule))


# --- merge_loads -------------------------------------------------------------------------------

def test_merge_loads_one_dma_per_operand_is_correct():
    ref = H.reference(*TMM_REF)
    # v5's 16 blocks of 4 KiB would make a 64 KiB tile: two of them do not fit beside the rest, refused
    assert _ids(TMM, "merge_loads") == ["v4@i1"]
    new, plan = H.rewrite(TMM, "merge_loads", "v4@i1")
    assert plan["params"]["bytes_per_partition"] == 16 * 128 * 4
    # the block dim moves behind the partition dim, the loop becomes one 3-D load
    assert "v4 = nl.ndarray((nl.par_dim(128), 16, 128)" in new, new
    assert "    v4[nl.arange(128)[:, None, None], nl.arange(16)[None, :, None], nl.arange(128)[None, None, :]] = " \
           "nl.load(v1[nl.arange(128)[:, None, None], nl.arange(16)[None, :, None], nl.arange(128)[None, None, :]], " \
           "dtype=np.float32, mask=None)\n" in new, new
    assert "for i1 in" not in new and "nisa.nc_matmul(v4[nl.arange(128)[:, None], i6, nl.arange(128)[None, :]]" in new, new
    H.ok(H.run(new, ref))
    # after split_block the rhs blocks are 2 KiB: their 16 loads merge too, the mask follows the 3-D index
    split, _ = H.rewrite(TMM, "split_block", "i2/2")
    assert _ids(split, "merge_loads") == ["v4@i1", "v5@i3"]
    both, _ = H.rewrite(split, "merge_loads", "v5@i3")
    assert "v5[i2, nl.arange(128)[:, None, None], nl.arange(16)[None, :, None], nl.arange(512)[None, None, :]] = " \
           "nl.load(v2[nl.arange(128)[:, None, None], nl.arange(16)[None, :, None], 512 * i2 + " \
           "nl.arange(512)[None, None, :]], dtype=np.float32, mask=-512 * i2 + -1 * nl.arange(512)[None, None, :] " \
           "+ 1983 >= 0)" in both, both
    H.ok(H.run(both, ref))


def test_merge_loads_keeps_the_rest_of_the_loop_body():
    # bmm's rhs blocks are loaded in the loop that uses them: the merged load goes in front of it
    ref = H.reference(*BMM_REF)
    assert _ids(BMM, "merge_loads") == ["v6@i1", "v7@i3"]
    new, _ = H.rewrite(BMM, "merge_loads", "v6@i1")
    assert "        v6[i0, nl.arange(64)[:, None, None], nl.arange(2)[None, :, None], nl.arange(512)[None, None, :]] = " \
           "nl.load(v2[i0, nl.arange(64)[:, None, None], 512 * nl.arange(2)[None, :, None] + " \
           "nl.arange(512)[None, None, :]]" in new, new
    assert "        for i1 in nl.affine_range(2):\n            for i3" in new, new
    H.ok(H.run(new, ref))


def test_merge_loads_refusals():
    # blocks read by VectorE one at a time (not a TensorE operand): merging only delays the first one
    elementwise = H.edit(TMM, "nisa.nc_matmul(v4[i6, nl.arange(128)[:, None], nl.arange(128)[None, :]], "
                         "v5[i2, i6, nl.arange(128)[:, None], 512 * i5 + nl.arange(512)[None, :]]",
                         "nisa.nc_matmul(v4[i6, nl.arange(128)[:, None], nl.arange(128)[None, :]], "
                         "nl.exp(v5[i2, i6, nl.arange(128)[:, None], 512 * i5 + nl.arange(512)[None, :]])")
    assert _ids(elementwise, "merge_loads") == ["v4@i1"]
    # a partial tile (64 of 128 partitions) or a loop variable used non-affinely
    partial = H.edit(TMM, "v4[i1, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(v1[nl.arange(128)",
                     "v4[i1, nl.arange(64)[:, None], nl.arange(128)[None, :]] = nl.load(v1[nl.arange(64)")
    square = H.edit(TMM, "nl.load(v1[nl.arange(128)[:, None], i1, ", "nl.load(v1[nl.arange(128)[:, None], i1 * i1 % 16, ")
    for bad in (partial, square):
        assert "v4@i1" not in _ids(bad, "merge_loads")
    # the merged tile would exceed 32 KiB per partition (v5: 16 x 4 KiB)
    assert "v5@i3" not in _ids(TMM, "merge_loads")
    # a panel that does not stay in SBUF anyway (8 x 8 blocks of 2 KiB per outer iteration): merging would
    # only change which of its tiles a residency policy keeps
    assert _ids(PANEL, "merge_loads") == []
    half = PANEL.replace("for i1 in nl.affine_range(8)", "for i1 in nl.affine_range(4)").replace(
        "for i7 in nl.affine_range(8)", "for i7 in nl.affine_range(4)").replace("(2, 8, 8, nl.par_dim(128), 512)",
                                                                               "(2, 4, 8, nl.par_dim(128), 512)")
    assert _ids(half, "merge_loads") == ["v6@i2"]  # 64 KiB per i0: stays resident
    # loads that each move more than the DMA's fixed latency is worth: bmm's rhs blocks at 2048 columns are
    # 512 KiB over 64 partitions (8 DMA engines: 3.9 us), merged only 16 KiB per partition
    big = BMM.replace("(2, 2, nl.par_dim(64), 512)", "(2, 2, nl.par_dim(64), 2048)").replace(
        "v6[i0, i1, nl.arange(64)[:, None], nl.arange(512)[None, :]] = nl.load(v2[i0, nl.arange(64)[:, None], "
        "512 * i1 + nl.arange(512)[None, :]]", "v6[i0, i1, nl.arange(64)[:, None], nl.arange(2048)[None, :]] = "
        "nl.load(v2[i0, nl.arange(64)[:, None], 2048 * i1 + nl.arange(2048)[None, :]]")
    assert _ids(BMM, "merge_loads") == ["v6@i1", "v7@i3"] and _ids(big, "merge_loads") == ["v7@i3"]


# --- hoist_nest ---------------------------------------------------------------------------------

def test_hoist_nest_transposes_once_per_batch_is_correct_and_faster():
    ref = H.reference(*BMM_REF)
    assert _ids(BMM, "hoist_nest") == ["v7+v8+v9@i1"]
    new, _before, _after = H.check(BMM, ref, "hoist_nest")
    assert "v7 = nl.ndarray((2, 2, nl.par_dim(128), 64)" in new and "v9 = nl.ndarray((2, nl.par_dim(64), 256)" in new, new
    assert "        for i3 in nl.affine_range(2):\n            v7[i0, i3, nl.arange(128)" in new, new
    assert "nisa.nc_matmul(v9[i0, nl.arange(64)[:, None], 128 * i4" in new, new
    assert new.index("for i3 in") < new.index("for i1 in"), new


def test_hoist_nest_refusals():
    # the nest reads a tile written in the loop (v6 depends on i1)
    reads_loop = H.edit(BMM, "v5[nl.arange(128)[:, None], nl.arange(128)[None, :]], is_stationary_onezero=False, "
                        "is_moving_onezero=True", "v6[i0, i1, nl.arange(64)[:, None], nl.arange(128)[None, :]], "
                        "is_stationary_onezero=False, is_moving_onezero=True")
    assert _ids(reads_loop, "hoist_nest") == ["v7@i1"]  # only the load of the lhs tiles stays hoistable
    # the loop variable in an index expression of the nest (the lhs rows would depend on i1)
    shifted = H.edit(BMM, "nl.load(v1[i0, 128 * i3 + nl.arange(128)", "nl.load(v1[i0, 128 * i1 + nl.arange(128)")
    assert not [site for site in _ids(shifted, "hoist_nest") if site.endswith("@i1")], _ids(shifted, "hoist_nest")
    # the transposed tiles of all blocks would not stay in SBUF (v9 256 KiB per partition)
    big = BMM.replace("(2, 2, nl.par_dim(64), 256)", "(2, 2, nl.par_dim(64), 65536)")
    assert _ids(big, "hoist_nest") == ["v7@i1"]  # the lhs loads alone (512 B per partition) still may


# --- split_block --------------------------------------------------------------------------------

def test_split_block_halves_the_panel_and_is_correct():
    ref = H.reference(*TMM_REF)
    assert _ids(TMM, "split_block") == ["i2/2"]  # 2 chunks of 512: no quarters
    new, plan = H.rewrite(TMM, "split_block")
    assert plan["params"]["factor"] == 2 and plan["params"]["chunks"] == ["i5"]
    for text in ("v5 = nl.ndarray((4, 16, nl.par_dim(128), 512)", "v6 = nl.zeros((4, 2, nl.par_dim(128), 512)",
                 "v7 = nl.ndarray((4, nl.par_dim(128), 512)", "for i2 in nl.affine_range(4):",
                 "for i5 in nl.affine_range(1):",
                 "nl.load(v2[nl.arange(128)[:, None], i3, 512 * i2 + nl.arange(512)[None, :]], dtype=np.float32, "
                 "mask=-512 * i2 + -1 * nl.arange(512)[None, :] + 1983 >= 0)",
                 "mask=-512 * i5 + -512 * i2 + -1 * nl.arange(512)[None, :] + 1983 >= 0",
                 "nl.store(v3[0, nl.arange(128)[:, None], 512 * i2 + nl.arange(512)[None, :]], value=v7[i2, "
                 "nl.arange(128)[:, None], nl.arange(512)[None, :]]"):
        assert text in new, (text, new)
    H.ok(H.run(new, ref))
    # the stationary's loads merged first (3-D indices elsewhere in the kernel): the split still applies
    merged, _ = H.rewrite(TMM, "merge_loads", "v4@i1")
    both, _ = H.rewrite(merged, "split_block")
    assert "v5 = nl.ndarray((4, 16, nl.par_dim(128), 512)" in both, both
    H.ok(H.run(both, ref))


def test_split_block_refusals():
    # a panel below 64 KiB per partition: the double buffer fits already
    small = TMM.replace("(2, 16, nl.par_dim(128), 1024)", "(2, 8, nl.par_dim(128), 1024)").replace(
        "for i3 in nl.affine_range(16)", "for i3 in nl.affine_range(8)")
    H.not_applicable(small, "split_block")
    # the chunk loop variable also walks something else (the stationary's columns)
    other = H.edit(TMM, "nisa.nc_matmul(v4[i6, nl.arange(128)[:, None], nl.arange(128)[None, :]]",
                   "nisa.nc_matmul(v4[i6, nl.arange(128)[:, None], 64 * i5 + nl.arange(64)[None, :]]")
    H.not_applicable(other, "split_block")
    # an odd number of chunks per block
    odd = TMM.replace("512", "256").replace("for i5 in nl.affine_range(2)", "for i5 in nl.affine_range(4)").replace(
        "v6 = nl.zeros((2, 2,", "v6 = nl.zeros((2, 4,")
    assert _ids(odd, "split_block") == ["i2/2", "i2/4"]  # 4 chunks of 256: halves and quarters
    odd3 = TMM.replace("1024", "1536").replace("for i5 in nl.affine_range(2)", "for i5 in nl.affine_range(3)")
    H.not_applicable(odd3, "split_block")
    # the loop variable in a non-affine position
    bad = H.edit(TMM, "v7[i2, nl.arange(128)[:, None], 512 * i5", "v7[i2 % 2, nl.arange(128)[:, None], 512 * i5")
    H.not_applicable(bad, "split_block")


# --- reblock -----------------------------------------------------------------------------------
# out = lhs^T @ rhs as the published transpose_matmul walks it: lhs (K=2048, M=2048) as (128, 16, 2048) in
# two 1024-wide M blocks (64 KiB per partition each), rhs (K, N=1984) as (128, 16, 1984) in 1024-wide
# panels loaded inside the block loop although they do not depend on it (all of rhs re-read per block)
BLK = H.kernel_source('''
    import numpy as np


    @nki.jit
    def kernel(v1, v2):
        v3 = nl.ndarray((16, 128, 1984), dtype=np.float32, buffer=nl.shared_hbm)
        v4 = nl.ndarray((2, 16, nl.par_dim(128), 1024), dtype=np.float32, name='lhs_local', buffer=nl.sbuf)
        v5 = nl.ndarray((2, 2, 16, nl.par_dim(128), 1024), dtype=np.float32, name='', buffer=nl.sbuf)
        v6 = nl.zeros((2, 2, 8, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.psum, lazy_initialization=True)
        v7 = nl.ndarray((2, 8, 2, nl.par_dim(128), 1024), dtype=np.float32, name='', buffer=nl.sbuf)
        for i0 in nl.affine_range(2):
            for i1 in nl.affine_range(16):
                v4[i0, i1, nl.arange(128)[:, None], nl.arange(1024)[None, :]] = nl.load(v1[nl.arange(128)[:, None], i1, 1024 * i0 + nl.arange(1024)[None, :]], dtype=np.float32, mask=None)
                ' end loop i1 '
            for i2 in nl.affine_range(2):
                for i3 in nl.affine_range(16):
                    v5[i0, i2, i3, nl.arange(128)[:, None], nl.arange(1024)[None, :]] = nl.load(v2[nl.arange(128)[:, None], i3, 1024 * i2 + nl.arange(1024)[None, :]], dtype=np.float32, mask=-1024 * i2 + -1 * nl.arange(1024)[None, :] + 1983 >= 0)
                    ' end loop i3 '
                for i4 in nl.affine_range(8):
                    for i5 in nl.affine_range(2):
                        for i6 in nl.affine_range(16):
                            v6[i0, i2, i4, i5, nl.arange(128)[:, None], nl.arange(512)[None, :]] += nisa.nc_matmul(v4[i0, i6, nl.arange(128)[:, None], nl.arange(128)[None, :] + 128 * i4], v5[i0, i2, i6, nl.arange(128)[:, None], 512 * i5 + nl.arange(512)[None, :]], is_stationary_onezero=False, is_moving_onezero=False, mask=-512 * i5 + -1024 * i2 + -1 * nl.arange(512)[None, :] + 1983 >= 0)
                            ' end loop i6 '
                        v7[i0, i4, i2, nl.arange(128)[:, None], 512 * i5 + nl.arange(512)[None, :]] = nl.copy(v6[i0, i2, i4, i5, nl.arange(128)[:, None], nl.arange(512)[None, :]], dtype=np.float32, mask=-512 * i5 + -1024 * i2 + -1 * nl.arange(512)[None, :] + 1983 >= 0)
                        ' end loop i5 '
                    nl.store(v3[8 * i0 + i4, nl.arange(128)[:, None], 1024 * i2 + nl.arange(1024)[None, :]], value=v7[i0, i4, i2, nl.arange(128)[:, None], nl.arange(1024)[None, :]], mask=-1024 * i2 + -1 * nl.arange(1024)[None, :] + 1983 >= 0)
                    ' end loop i4 '
                ' end loop i2 '
            ' end loop i0 '
        return v3
''')
BLK_REF = ("a, b", 'np.einsum("pkm,pkn->mn", a, b).reshape(16, 128, 1984)', [(128, 16, 2048), (128, 16, 1984)])


def test_reblock_widens_the_block_narrows_the_panel_and_is_correct():
    ref = H.reference(*BLK_REF)
    # 2 x 64 KiB of lhs beside a 64 KiB panel exceeds 176 KiB: the panel is halved; 4x would not fit at all
    assert _ids(BLK, "reblock") == ["i0*2+i2/2"]
    new, plan = H.rewrite(BLK, "reblock")
    assert plan["params"]["panel_factor"] == 2 and plan["params"]["block_bytes"] == 64 * 1024
    for text in ("v4 = nl.ndarray((1, 16, nl.par_dim(128), 2048)", "v5 = nl.ndarray((1, 4, 16, nl.par_dim(128), 512)",
                 "v6 = nl.zeros((1, 4, 16, 2, nl.par_dim(128), 512)", "v7 = nl.ndarray((1, 16, 4, nl.par_dim(128), 512)",
                 "for i0 in nl.affine_range(1):", "for i2 in nl.affine_range(4):", "for i4 in nl.affine_range(16):",
                 "for i5 in nl.affine_range(1):",
                 "nl.load(v1[nl.arange(128)[:, None], i1, 2048 * i0 + nl.arange(2048)[None, :]]",
                 "nl.store(v3[16 * i0 + i4, nl.arange(128)[:, None], 512 * i2 + nl.arange(512)[None, :]]"):
        assert text in new, (text, new)
    base, after = H.run(BLK, ref), H.run(new, ref)
    assert H.ok(after) < H.ok(base), (base["latency_ms"], after["latency_ms"])
    # rhs is read once instead of twice
    assert after["metrics"]["hbm_read_bytes"] < 0.7 * base["metrics"]["hbm_read_bytes"]


def test_reblock_after_split_block_only_widens():
    split, _ = H.rewrite(BLK, "split_block")  # panels of 512 first: 2 x 64 + 32 KiB fits
    assert _ids(split, "reblock") == ["i0*2"]
    new, _ = H.rewrite(split, "reblock")
    assert "for i2 in nl.affine_range(4):" in new and "v4 = nl.ndarray((1, 16, nl.par_dim(128), 2048)" in new


def test_reblock_refusals():
    # a trip count the factor does not divide
    odd = H.edit(BLK, "for i0 in nl.affine_range(2):", "for i0 in nl.affine_range(3):")
    odd = H.edit(odd, "v4 = nl.ndarray((2,", "v4 = nl.ndarray((3,")
    assert "i0*2+i2/2" not in _ids(odd, "reblock")
    # the panel is small enough to stay resident (8 K tiles, 2 x 32 KiB of rhs): nothing is re-read
    small = BLK.replace("for i3 in nl.affine_range(16)", "for i3 in nl.affine_range(8)").replace(
        "v5 = nl.ndarray((2, 2, 16,", "v5 = nl.ndarray((2, 2, 8,")
    H.not_applicable(small, "reblock")
    # the inner loop's loads depend on the block (not a re-read operand)
    dep = H.edit(BLK, "nl.load(v2[nl.arange(128)[:, None], i3, 1024 * i2 +", "nl.load(v2[nl.arange(128)[:, None], i3 + 0 * i0, 1024 * i2 +")
    H.not_applicable(dep, "reblock")
