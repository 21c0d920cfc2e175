"""Rule ``merge_chunks``: a compiler-style loop over free-dimension chunks becomes wider instructions."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402
from test_compiler_style import KERNEL  # noqa: E402  (silu written the way neuronxcc emits it)


def test_merge_chunks_is_correct_and_issues_fewer_instructions():
    ref = H.reference("x", "x / (1 + np.exp(-x))", [(256, 1024)])
    assert [p["id"] for p in H.plans(KERNEL, "merge_chunks")] == ["merge_chunks:i2*2"]
    new, before, after = H.check(KERNEL, ref, "merge_chunks", faster=False)
    assert "for i2" not in new, new
    # the per-chunk block temps lose their chunk dimension and get the whole width
    assert "v6 = nl.ndarray((2, nl.par_dim(128), 1024), dtype=np.float32, name='', buffer=nl.sbuf)" in new, new
    assert "v5[i0, nl.arange(128)[:, None], nl.arange(1024)[None, :]] = nl.multiply(v4[i0, nl.arange(128)[:, None], " \
           "nl.arange(1024)[None, :]], v8[i0, nl.arange(128)[:, None], nl.arange(1024)[None, :]]" in new, new
    m_before, m_after = H.run(KERNEL, ref)["metrics"], H.run(new, ref)["metrics"]
    assert m_after["instruction_count"] < m_before["instruction_count"], (m_before, m_after)
    # the fusions still see their chain afterwards
    fused, _ = H.rewrite(new, "fuse_silu")
    assert "op=nl.silu, data=v4[i0, nl.arange(128)[:, None], nl.arange(1024)[None, :]]" in fused, fused


def test_merge_chunks_refuses():
    # the chunk variable is used outside an index (a scalar operand)
    H.not_applicable(H.edit(KERNEL, "operand0=np.dtype(np.float32).type(1)", "operand0=i2 + 1.0"), "merge_chunks")
    # a block temp is read outside the loop
    outside = H.edit(KERNEL, "    return v2\n", "    nl.store(v2[nl.arange(128)[:, None], nl.arange(512)[None, :]], "
                     "value=v8[0, 0, nl.arange(128)[:, None], nl.arange(512)[None, :]])\n    return v2\n")
    H.not_applicable(outside, "merge_chunks")
    # a reduction in the body
    reduce = H.edit(KERNEL, "nisa.reciprocal(data=v7[i0, i2, nl.arange(128)[:, None], nl.arange(512)[None, :]], "
                    "mask=None, dtype=np.float32)", "nisa.activation(op=nl.copy, data=v7[i0, i2, nl.arange(128)[:, None], "
                    "nl.arange(512)[None, :]], reduce_op=nl.add, reduce_res=v3[nl.arange(128)[:, None], 0])")
    H.not_applicable(reduce, "merge_chunks")
