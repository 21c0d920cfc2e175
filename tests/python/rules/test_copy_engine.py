"""Rule ``copy_engine``: SBUF copies pinned to ScalarE / VectorE; PSUM copies are left to evict_engine."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

# a partition shift by copy (the published rope's form) followed by VectorE work
KERNEL = H.kernel_source('''
    @nki.jit
    def kernel(x, c):
        P, S = x.shape
        half = P // 2
        out = nl.ndarray((half, S), dtype=x.dtype, buffer=nl.shared_hbm)
        i_up = nl.arange(half)[:, None]
        i_lo = i_up + half
        i_s = nl.arange(S)[None, :]
        x_sb = nl.ndarray((P, S), dtype=x.dtype, buffer=nl.sbuf)
        x_sb[nl.arange(P)[:, None], i_s] = nl.load(x[nl.arange(P)[:, None], i_s])
        c_sb = nl.load(c[i_up, i_s])
        lo = nl.copy(x_sb[i_lo, i_s])
        y = nisa.tensor_tensor(x_sb[i_up, i_s], c_sb, nl.multiply)
        y = nisa.tensor_tensor(y, lo, nl.add)
        nl.store(out[i_up, i_s], y)
        return out
''')


def test_copy_engine_proposes_both_engines_and_stays_correct():
    ref = H.reference("x, c", "x[:64] * c + x[64:]", [(128, 512), (64, 512)])
    assert sorted(p["id"] for p in H.plans(KERNEL, "copy_engine")) == ["copy_engine:lo@scalar", "copy_engine:lo@vector"]
    new, before, after = H.check(KERNEL, ref, "copy_engine", faster=False, site="lo@scalar")
    assert "lo = nisa.tensor_copy(x_sb[i_lo, i_s], engine=nisa.scalar_engine)" in new, new
    assert after <= before * 1.01, (before, after)
    assert [p["id"] for p in H.plans(new, "copy_engine")] == ["copy_engine:lo@vector"]


def test_copy_engine_leaves_psum_copies_alone():
    psum = H.edit(KERNEL, "lo = nl.copy(x_sb[i_lo, i_s])", "lo = nl.copy(nl.matmul(x_sb[i_up, 0:64], c_sb[0:64, 0:512]))")
    H.not_applicable(psum, "copy_engine")
