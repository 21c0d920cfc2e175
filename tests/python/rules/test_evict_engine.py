"""Rule ``evict_engine``: PSUM evictions pinned to ScalarE / VectorE."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

# a row-block GEMM whose VectorE also runs an elementwise chain per row block
KERNEL = H.kernel_source('''
    @nki.jit
    def kernel(x, w):
        M, K = x.shape
        _, N = w.shape
        out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // 128):
            x_t = nl.load(x[i * 128:(i + 1) * 128, 0:K])
            y_t = nl.multiply(nl.add(x_t, x_t), x_t)
            for n in nl.affine_range(N // 512):
                acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
                for k in nl.affine_range(K // 128):
                    w_t = nl.load(w[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                    acc += nl.matmul(y_t[:, k * 128:(k + 1) * 128], w_t)
                res = nl.copy(acc, dtype=out.dtype)
                nl.store(out[i * 128:(i + 1) * 128, n * 512:(n + 1) * 512], value=res)
        return out
''')


def test_evict_engine_proposes_both_engines_and_stays_correct():
    ref = H.reference("x, w", "((x + x) * x) @ w", [(512, 256), (256, 1024)])
    assert sorted(p["id"] for p in H.plans(KERNEL, "evict_engine")) == \
        ["evict_engine:res@scalar", "evict_engine:res@vector"]
    new, before, after = H.check(KERNEL, ref, "evict_engine", faster=False, site="res@scalar")
    assert "res = nisa.tensor_copy(acc, dtype=out.dtype, engine=nisa.scalar_engine)" in new, new
    assert after <= before * 1.01, (before, after)
    # pinned: only the other engine is proposed now
    assert [p["id"] for p in H.plans(new, "evict_engine")] == ["evict_engine:res@vector"]


def test_evict_engine_adds_the_isa_import_when_missing():
    src = KERNEL.replace("import neuronxcc.nki.isa as nisa\n", "")
    new, _ = H.rewrite(src, "evict_engine", "res@vector")  # reached through the nki alias
    assert "res = nki.isa.tensor_copy(acc, dtype=out.dtype, engine=nki.isa.vector_engine)" in new, new
    bare = src.replace("import neuronxcc.nki as nki\n", "from neuronxcc.nki import jit\n").replace("@nki.jit", "@jit")
    new, _ = H.rewrite(bare, "evict_engine", "res@vector")
    assert "import neuronxcc.nki.language as nl\nimport neuronxcc.nki.isa as nisa\n" in new, new
    assert "res = nisa.tensor_copy(acc, dtype=out.dtype, engine=nisa.vector_engine)" in new, new


def test_evict_engine_refuses_sbuf_copies():
    sbuf = H.edit(KERNEL, "res = nl.copy(acc, dtype=out.dtype)", "res = nl.copy(y_t[:, 0:512], dtype=out.dtype)")
    H.not_applicable(sbuf, "evict_engine")
    rebound = H.edit(KERNEL, "            res = nl.copy", "            acc = nl.copy(x_t[:, 0:512])\n"
                     "            res = nl.copy")
    H.not_applicable(rebound, "evict_engine")  # acc is not always a PSUM tile
