"""Rule fuse_nests: a two-pass softmax of a matmul, the way neuronxcc emits it (docs/rules.md).

out = softmax over columns of (lhsT^T @ rhs), lhsT (64, 512), rhs (64, 8192): 4 row tiles of 128 by
8 column blocks of 1024. The first nest computes every score tile (128 KiB per partition in all) and the
row maxima; the second reads them back per row tile. Fused, one row tile's scores (32 KiB per partition)
live at a time.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

SOFTMAX = H.kernel_source('''
    import numpy as np


    @nki.jit
    def kernel(v1, v2):
        v3 = nl.ndarray((4, 128, 8192), dtype=np.float32, buffer=nl.shared_hbm)
        v4 = nl.ndarray((8, nl.par_dim(64), 1024), dtype=np.float32, name='rhs_local', buffer=nl.sbuf)
        v5 = nl.ndarray((8, 4, nl.par_dim(64), 128), dtype=np.float32, name='lhs_local', buffer=nl.sbuf)
        v6 = nl.zeros((8, 4, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.psum, lazy_initialization=True)
        v7 = nl.ndarray((4, 8, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.sbuf)
        v8 = nl.ndarray((8, 4, 2, nl.par_dim(128), 1), dtype=np.float32, name='', buffer=nl.sbuf)
        v9 = nl.ndarray((4, nl.par_dim(128), 1), dtype=np.float32, name='', buffer=nl.sbuf)
        v10 = nl.ndarray((4, nl.par_dim(128), 1), dtype=np.float32, name='', buffer=nl.sbuf)
        v11 = nl.ndarray((4, 8, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.sbuf)
        v12 = nl.ndarray((4, 8, 2, nl.par_dim(128), 1), dtype=np.float32, name='', buffer=nl.sbuf)
        v13 = nl.ndarray((4, nl.par_dim(128), 1), dtype=np.float32, name='', buffer=nl.sbuf)
        v14 = nl.ndarray((4, nl.par_dim(128), 1), dtype=np.float32, name='', buffer=nl.sbuf)
        v15 = nl.ndarray((4, nl.par_dim(128), 8192), dtype=np.float32, name='', buffer=nl.sbuf)
        for i1 in nl.affine_range(8):
            v4[i1, nl.arange(64)[:, None], nl.arange(1024)[None, :]] = nl.load(v2[nl.arange(64)[:, None], 1024 * i1 + nl.arange(1024)[None, :]], dtype=np.float32, mask=None)
            for i2 in nl.affine_range(4):
                v5[i1, i2, nl.arange(64)[:, None], nl.arange(128)[None, :]] = nl.load(v1[nl.arange(64)[:, None], 128 * i2 + nl.arange(128)[None, :]], dtype=np.float32, mask=None)
                for i3 in nl.affine_range(2):
                    v6[i1, i2, i3, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.nc_matmul(v5[i1, i2, nl.arange(64)[:, None], nl.arange(128)[None, :]], v4[i1, nl.arange(64)[:, None], 512 * i3 + nl.arange(512)[None, :]], is_stationary_onezero=False, is_moving_onezero=False, mask=None)
                    v7[i2, i1, i3, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nl.copy(v6[i1, i2, i3, nl.arange(128)[:, None], nl.arange(512)[None, :]], dtype=np.float32, mask=None)
                    v8[i1, i2, i3, nl.arange(128)[:, None], 0] = nisa.tensor_reduce(nl.max, data=v7[i2, i1, i3, nl.arange(128)[:, None], nl.arange(512)[None, :]], mask=None, axis=[1], dtype=np.float32, negate=False)
                    v9[i2, nl.arange(128)[:, None], 0] = nl.loop_reduce(v8[i1, i2, i3, nl.arange(128)[:, None], 0], op=np.max, loop_indices=[i1, i3], mask=None, dtype=np.float32)
                    ' end loop i3 '
                ' end loop i2 '
            ' end loop i1 '
        for i4 in nl.affine_range(4):
            v10[i4, nl.arange(128)[:, None], 0] = nisa.tensor_scalar(data=v9[i4, nl.arange(128)[:, None], 0], op0=nl.multiply, operand0=-1.0, reverse0=False, dtype=np.float32, mask=None)
            for i5 in nl.affine_range(8):
                for i6 in nl.affine_range(2):
                    v11[i4, i5, i6, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.activation(op=nl.exp, data=v7[i4, i5, i6, nl.arange(128)[:, None], nl.arange(512)[None, :]], bias=v10[i4, nl.arange(128)[:, None], 0], scale=1.0, mask=None, dtype=np.float32)
                    v12[i4, i5, i6, nl.arange(128)[:, None], 0] = nisa.tensor_reduce(nl.add, data=v11[i4, i5, i6, nl.arange(128)[:, None], nl.arange(512)[None, :]], mask=None, axis=[1], dtype=np.float32, negate=False)
                    v13[i4, nl.arange(128)[:, None], 0] = nl.loop_reduce(v12[i4, i5, i6, nl.arange(128)[:, None], 0], op=np.add, loop_indices=[i5, i6], mask=None, dtype=np.float32)
            v14[i4, nl.arange(128)[:, None], 0] = nisa.reciprocal(data=v13[i4, nl.arange(128)[:, None], 0], mask=None, dtype=np.float32)
            for i7 in nl.affine_range(8):
                for i8 in nl.affine_range(2):
                    v15[i4, nl.arange(128)[:, None], 1024 * i7 + 512 * i8 + nl.arange(512)[None, :]] = nisa.tensor_scalar(data=v11[i4, i7, i8, nl.arange(128)[:, None], nl.arange(512)[None, :]], op0=nl.multiply, operand0=v14[i4, nl.arange(128)[:, None], 0], reverse0=False, dtype=np.float32, mask=None)
            nl.store(v3[i4, nl.arange(128)[:, None], nl.arange(8192)[None, :]], value=v15[i4, nl.arange(128)[:, None], nl.arange(8192)[None, :]], mask=None)
        return v3
''')
SOFTMAX_REF = ("a, b", "(lambda s: (np.exp(s - s.max(-1, keepdims=True)) / np.exp(s - s.max(-1, keepdims=True))"
               ".sum(-1, keepdims=True)).reshape(4, 128, 8192))(a.T @ b)", [(64, 512), (64, 8192)])


def _sites(source):
    return sorted(p["params"]["site"] for p in H.plans(source, "fuse_nests"))


def test_fuse_nests_is_correct_and_removes_the_spill():
    ref = H.reference(*SOFTMAX_REF)
    assert _sites(SOFTMAX) == ["i1+i4"]
    new, plan = H.rewrite(SOFTMAX, "fuse_nests")
    assert plan["params"]["map"] == {"i2": "i4"}, plan
    # the prelude keeps the loads, the chain moves under the consumer's row loop with i2 renamed to i4
    assert "    for i1 in nl.affine_range(8):\n        v4[i1, " in new, new
    assert "            v5[i1, i2, nl.arange(64)[:, None], nl.arange(128)[None, :]] = nl.load(" in new, new
    assert "    for i4 in nl.affine_range(4):\n        for i1 in nl.affine_range(8):\n" \
           "            for i3 in nl.affine_range(2):\n                v6[i1, i4, i3, " in new, new
    assert "v9[i4, nl.arange(128)[:, None], 0] = nl.loop_reduce(v8[i1, i4, i3, " in new, new
    before, after = H.run(SOFTMAX, ref), H.run(new, ref)
    H.ok(before)
    H.ok(after)
    spilled = before["metrics"]["spill_save_bytes"]
    assert spilled > 0, before["metrics"]
    assert after["metrics"]["spill_save_bytes"] < spilled / 4, (spilled, after["metrics"]["spill_save_bytes"])
    assert after["latency_ms"] < before["latency_ms"]


def test_fuse_nests_refusals():
    # the consumer reads another row tile's scores: not the block the same producer iteration wrote
    shifted = H.edit(SOFTMAX, "data=v7[i4, i5, i6,", "data=v7[3 - i4, i5, i6,")
    # the row loops differ in length
    longer = H.edit(SOFTMAX, "for i4 in nl.affine_range(4):", "for i4 in nl.affine_range(2):")
    # a prelude statement reads a tensor the chain writes (it could no longer run first)
    prelude = H.edit(SOFTMAX, "v5[i1, i2, nl.arange(64)[:, None], nl.arange(128)[None, :]] = nl.load(v1[",
                     "v5[i1, i2, nl.arange(64)[:, None], nl.arange(128)[None, :]] = nl.copy(v7[i2, i1, 0, nl.arange(64)[:, None], nl.arange(128)[None, :]]) + nl.load(v1[")
    # the reduction loop is sequential: its order is not free
    sequential = H.edit(SOFTMAX, "for i3 in nl.affine_range(2):", "for i3 in nl.sequential_range(2):")
    for bad in (shifted, longer, prelude, sequential):
        H.not_applicable(bad, "fuse_nests")


def test_fuse_nests_refuses_a_statement_between_that_writes_what_the_chain_reads():
    between = H.edit(SOFTMAX, "    for i4 in nl.affine_range(4):\n",
                     "    v4[0, nl.arange(64)[:, None], nl.arange(1024)[None, :]] = nl.load(v2[nl.arange(64)[:, None], nl.arange(1024)[None, :]], dtype=np.float32, mask=None)\n"
                     "    for i4 in nl.affine_range(4):\n")
    H.not_applicable(between, "fuse_nests")
