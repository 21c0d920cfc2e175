"""Rule block_dim: a free dimension indexed by a scalar in every access becomes a block dimension
(gqa_full's transposed keys, compiler style; docs/rules.md).

out[h] = k[:, h, :]^T @ x for 4 heads: the heads of k are loaded into one tile (128, 4, 512), each
matmul reads one head's slice through a scalar index.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

HEADS = H.kernel_source('''
    import numpy as np


    @nki.jit
    def kernel(v1, v2):
        v3 = nl.ndarray((4, 128, 512), dtype=np.float32, buffer=nl.shared_hbm)
        v4 = nl.ndarray((nl.par_dim(128), 4, 128), dtype=np.float32, name='k_local', buffer=nl.sbuf)
        v5 = nl.ndarray((nl.par_dim(128), 512), dtype=np.float32, name='x_local', buffer=nl.sbuf)
        v6 = nl.zeros((4, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.psum, lazy_initialization=True)
        v7 = nl.ndarray((4, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.sbuf)
        for i0 in nl.affine_range(4):
            v4[nl.arange(128)[:, None], i0, nl.arange(128)[None, :]] = nl.load(v1[nl.arange(128)[:, None], i0, nl.arange(128)[None, :]], dtype=np.float32, mask=None)
        v5[nl.arange(128)[:, None], nl.arange(512)[None, :]] = nl.load(v2[nl.arange(128)[:, None], nl.arange(512)[None, :]], dtype=np.float32, mask=None)
        for i1 in nl.affine_range(4):
            v6[i1, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.nc_matmul(v4[nl.arange(128)[:, None], i1, nl.arange(128)[None, :]], v5[nl.arange(128)[:, None], nl.arange(512)[None, :]], is_stationary_onezero=False, is_moving_onezero=False, mask=None)
            v7[i1, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nl.copy(v6[i1, nl.arange(128)[:, None], nl.arange(512)[None, :]], dtype=np.float32, mask=None)
            nl.store(v3[i1, nl.arange(128)[:, None], nl.arange(512)[None, :]], value=v7[i1, nl.arange(128)[:, None], nl.arange(512)[None, :]], mask=None)
        return v3
''')
HEADS_REF = ("k, x", 'np.einsum("khm,kn->hmn", k, x)', [(128, 4, 128), (128, 512)])


def _sites(source):
    return sorted(p["params"]["site"] for p in H.plans(source, "block_dim"))


def test_block_dim_moves_the_head_dimension_in_front_and_is_correct():
    ref = H.reference(*HEADS_REF)
    assert _sites(HEADS) == ["v4/1"]
    new, plan = H.rewrite(HEADS, "block_dim")
    assert plan["params"] == {"site": "v4/1", "tensor": "v4", "dim": 1, "entries": 4, "block_bytes": 512}, plan
    assert "v4 = nl.ndarray((4, nl.par_dim(128), 128), " in new, new
    assert "v4[i0, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(v1[nl.arange(128)[:, None], i0, " in new
    assert "nisa.nc_matmul(v4[i1, nl.arange(128)[:, None], nl.arange(128)[None, :]], v5[" in new, new
    before, after = H.run(HEADS, ref), H.run(new, ref)
    H.ok(before)
    H.ok(after)


def test_block_dim_refusals():
    # one access spans the dimension (a store of the whole tile): the tile shape would change
    whole = H.edit(HEADS, "    return v3\n",
                   "    nl.store(v3[0, nl.arange(128)[:, None], nl.arange(512)[None, :]], value=v4[nl.arange(128)[:, None], nl.arange(4)[None, :, None], nl.arange(128)[None, None, :]], mask=None)\n    return v3\n")
    # a partial subscript (fewer entries than the rank)
    partial = H.edit(HEADS, "nisa.nc_matmul(v4[nl.arange(128)[:, None], i1, nl.arange(128)[None, :]]",
                     "nisa.nc_matmul(v4[nl.arange(128)[:, None], i1]")
    # blocks smaller than 2 KiB per partition are left alone
    small = H.edit(HEADS, "v4 = nl.ndarray((nl.par_dim(128), 4, 128)", "v4 = nl.ndarray((nl.par_dim(128), 4, 64)")
    small = small.replace("i0, nl.arange(128)[None, :]] = nl.load(v1[nl.arange(128)[:, None], i0, nl.arange(128)[None, :]]",
                          "i0, nl.arange(64)[None, :]] = nl.load(v1[nl.arange(128)[:, None], i0, nl.arange(64)[None, :]]")
    for bad in (whole, partial, small):
        H.not_applicable(bad, "block_dim")
