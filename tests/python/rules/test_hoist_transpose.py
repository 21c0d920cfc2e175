"""Rule ``hoist_transpose``: nl.matmul's x transposes move out of the loop over output blocks."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

KERNEL = H.kernel_source('''
    @nki.jit
    def kernel(x, w):
        M, K = x.shape
        _, N = w.shape
        out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // 128):
            x_t = nl.load(x[i * 128:(i + 1) * 128, 0:K])
            for n in nl.affine_range(N // 512):
                acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
                for k in nl.affine_range(K // 128):
                    w_t = nl.load(w[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                    acc += nl.matmul(x_t[:, k * 128:(k + 1) * 128], w_t)
                res = nl.copy(acc, dtype=out.dtype)
                nl.store(out[i * 128:(i + 1) * 128, n * 512:(n + 1) * 512], value=res)
        return out
''')


def test_hoist_transpose_is_correct_and_saves_tensor_engine_time():
    ref = H.reference("x, w", "x @ w", [(256, 512), (512, 2048)])
    assert [p["id"] for p in H.plans(KERNEL, "hoist_transpose")] == ["hoist_transpose:x_t@n"]
    new, before, after = H.check(KERNEL, ref, "hoist_transpose")
    lines = new.splitlines()
    at = lines.index("        x_t_T = nl.ndarray((128, K // 128, x_t.shape[0]), dtype=x_t.dtype, buffer=nl.sbuf)")
    assert lines[at + 4] == "        for n in nl.affine_range(N // 512):", new
    assert "acc += nl.matmul(x_t_T[:, k, :], w_t, transpose_x=True)" in new
    before_pe = H.run(KERNEL, ref)["metrics"]["engine_busy_ms"]["tensor"]
    after_pe = H.run(new, ref)["metrics"]["engine_busy_ms"]["tensor"]
    assert after_pe < before_pe, (before_pe, after_pe)  # 4 x 4 transposes per row block become 4
    assert H.plans(new, "hoist_transpose") == []  # x_t_T slices are not re-transposed


def test_hoist_transpose_refusals():
    # x depends on n: the transposes differ per iteration
    per_n = H.edit(KERNEL, "            acc = nl.zeros", "            x_t = nl.load(x[i * 128:(i + 1) * 128, "
                   "n * 0:K + n * 0])\n            acc = nl.zeros")
    H.not_applicable(per_n, "hoist_transpose")
    # x written inside the loop
    written = H.edit(KERNEL, "            res = nl.copy", "            x_t[0:1, 0:K] = x_t[1:2, 0:K]\n"
                     "            res = nl.copy")
    H.not_applicable(written, "hoist_transpose")
    # already transposed input (transpose_x=True) or a slice that is not the loop's block
    done = H.edit(KERNEL, "nl.matmul(x_t[:, k * 128:(k + 1) * 128], w_t)",
                  "nl.matmul(x_t[:, k * 128:(k + 1) * 128], w_t, transpose_x=True)")
    H.not_applicable(done, "hoist_transpose")
    other = H.edit(KERNEL, "nl.matmul(x_t[:, k * 128:(k + 1) * 128], w_t)", "nl.matmul(x_t[:, 0:128], w_t)")
    H.not_applicable(other, "hoist_transpose")
