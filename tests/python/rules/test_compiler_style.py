"""Peephole rules on compiler-style kernels: block temps, mask=None/dtype=float32 keywords, zero bias tiles."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

# silu written the way neuronxcc emits it (the published NKIBench baselines' style)
KERNEL = H.kernel_source('''
    import numpy as np


    @nki.jit
    def kernel(v1):
        v2 = nl.ndarray((256, 1024), dtype=np.float32, buffer=nl.shared_hbm)
        v3 = nl.ndarray((nl.par_dim(128), 1), dtype=np.float32, name='memset.1', buffer=nl.sbuf)
        v4 = nl.ndarray((2, nl.par_dim(128), 1024), dtype=np.float32, name='x_local', buffer=nl.sbuf)
        v5 = nl.ndarray((2, nl.par_dim(128), 1024), dtype=np.float32, name='', buffer=nl.sbuf)
        v6 = nl.ndarray((2, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.sbuf)
        v7 = nl.ndarray((2, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.sbuf)
        v8 = nl.ndarray((2, 2, nl.par_dim(128), 512), dtype=np.float32, name='', buffer=nl.sbuf)
        v3[nl.arange(128)[:, None], 0] = nisa.memset(shape=(128, 1), value=np.dtype(np.uint16).type(0), dtype=np.float32, mask=None, engine=nki.isa.unknown_engine)
        for i0 in nl.affine_range(2):
            v4[i0, nl.arange(128)[:, None], nl.arange(1024)[None, :]] = nl.load(v1[128 * i0 + nl.arange(128)[:, None], nl.arange(1024)[None, :]], dtype=np.float32, mask=None)
            for i2 in nl.affine_range(2):
                v6[i0, i2, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.activation(op=nl.exp, data=v4[i0, nl.arange(128)[:, None], 512 * i2 + nl.arange(512)[None, :]], bias=v3[nl.arange(128)[:, None], 0], scale=-1.0, mask=None, dtype=np.float32)
                v7[i0, i2, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.tensor_scalar(data=v6[i0, i2, nl.arange(128)[:, None], nl.arange(512)[None, :]], op0=nl.add, operand0=np.dtype(np.float32).type(1), reverse0=True, dtype=np.float32, mask=None, engine=nki.isa.unknown_engine)
                v8[i0, i2, nl.arange(128)[:, None], nl.arange(512)[None, :]] = nisa.reciprocal(data=v7[i0, i2, nl.arange(128)[:, None], nl.arange(512)[None, :]], mask=None, dtype=np.float32)
                v5[i0, nl.arange(128)[:, None], 512 * i2 + nl.arange(512)[None, :]] = nl.multiply(v4[i0, nl.arange(128)[:, None], 512 * i2 + nl.arange(512)[None, :]], v8[i0, i2, nl.arange(128)[:, None], nl.arange(512)[None, :]], mask=None, dtype=np.float32)
            nl.store(v2[128 * i0 + nl.arange(128)[:, None], nl.arange(1024)[None, :]], value=v5[i0, nl.arange(128)[:, None], nl.arange(1024)[None, :]], mask=None)
        return v2
''')


def test_fuse_silu_through_block_temps_is_correct_and_faster():
    ref = H.reference("x", "x / (1 + np.exp(-x))", [(256, 1024)])
    assert {p["rule"] for p in H.plans(KERNEL)} >= {"fuse_silu", "fuse_sigmoid", "fuse_reciprocal"}
    new, before, after = H.check(KERNEL, ref, "fuse_silu")
    assert "op=nl.silu, data=v4[i0, nl.arange(128)[:, None], 512 * i2 + nl.arange(512)[None, :]])" in new, new
    for gone in ("v6", "v7", "v8"):  # the block temps' stores and allocations go
        assert f"{gone} = nl.ndarray" not in new and f"{gone}[" not in new, new
    assert after < before * 0.9, (before, after)


def test_block_temp_read_twice_or_at_another_index_is_not_inlined():
    # v8 read a second time: it is not a temp any more, the chain cannot be deleted
    twice = H.edit(KERNEL, "        nl.store(v2", "            v5[i0, nl.arange(128)[:, None], 512 * i2 + "
                   "nl.arange(512)[None, :]] = nl.copy(v8[i0, i2, nl.arange(128)[:, None], nl.arange(512)[None, :]])\n"
                   "        nl.store(v2")
    H.not_applicable(twice, "fuse_silu")
    # the read uses a different index than the store: not the same element
    shifted = H.edit(KERNEL, "nl.multiply(v4[i0, nl.arange(128)[:, None], 512 * i2 + nl.arange(512)[None, :]], "
                     "v8[i0, i2,", "nl.multiply(v4[i0, nl.arange(128)[:, None], 512 * i2 + nl.arange(512)[None, :]], "
                     "v8[i0, 1 - i2,")
    H.not_applicable(shifted, "fuse_silu")
    # a bias that is not all zeros: exp(-x + b) is not exp(-x)
    biased = H.edit(KERNEL, "value=np.dtype(np.uint16).type(0)", "value=np.dtype(np.float32).type(1)")
    H.not_applicable(biased, "fuse_silu")
    # a real mask is not a trivial keyword
    masked = H.edit(KERNEL, "nisa.reciprocal(data=v7[i0, i2, nl.arange(128)[:, None], nl.arange(512)[None, :]], "
                    "mask=None", "nisa.reciprocal(data=v7[i0, i2, nl.arange(128)[:, None], nl.arange(512)[None, :]], "
                    "mask=(nl.arange(128)[:, None] < 64)")
    H.not_applicable(masked, "fuse_silu")
