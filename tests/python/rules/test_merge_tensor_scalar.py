"""Rule ``merge_tensor_scalar``: chained tile-by-scalar ops become one two-op tensor_scalar."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

KERNEL = H.kernel_source('''
    @nki.jit
    def kernel(x):
        M, N = x.shape
        out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // 128):
            x_t = nl.load(x[i * 128:(i + 1) * 128, 0:N])
            s_t = nl.multiply(x_t, 1.0 / N)
            y_t = nl.subtract(2.0, s_t)
            z_t = nisa.tensor_scalar(data=y_t, op0=nl.multiply, operand0=3.0)
            w_t = nisa.tensor_scalar(data=z_t, op0=nl.add, operand0=0.5)
            nl.store(out[i * 128:(i + 1) * 128, 0:N], value=w_t)
        return out
''')


def _ref():
    return H.reference("x", "(2.0 - x / x.shape[1]) * 3.0 + 0.5", [(256, 1024)])


def test_merge_nl_forms_then_tensor_scalar_forms():
    sites = sorted(p["params"]["site"] for p in H.plans(KERNEL, "merge_tensor_scalar"))
    assert sites == ["w_t", "y_t", "z_t"], sites
    one, before, mid = H.check(KERNEL, _ref(), "merge_tensor_scalar", site="y_t")
    assert ("y_t = nisa.tensor_scalar(data=x_t, op0=nl.multiply, operand0=1.0 / N, op1=nl.subtract, "
            "operand1=2.0, reverse1=True)") in one, one
    assert "s_t" not in one
    two, _mid, after = H.check(one, _ref(), "merge_tensor_scalar", site="w_t")
    assert ("w_t = nisa.tensor_scalar(data=y_t, op0=nl.multiply, operand0=3.0, op1=nl.add, "
            "operand1=0.5)") in two, two
    assert after < before


def test_merge_refuses_unprovable_or_shared_intermediates():
    shared = H.edit(KERNEL, "value=w_t)", "value=nl.add(w_t, z_t))")
    assert "w_t" not in [p["params"]["site"] for p in H.plans(shared, "merge_tensor_scalar")]
    param = H.edit(H.edit(KERNEL, "def kernel(x):", "def kernel(x, eps):"), "1.0 / N", "eps")
    assert "y_t" not in [p["params"]["site"] for p in H.plans(param, "merge_tensor_scalar")]  # eps may be a tile
    has_op1 = H.edit(KERNEL, "operand0=3.0)", "operand0=3.0, op1=nl.add, operand1=1.0)")
    assert "w_t" not in [p["params"]["site"] for p in H.plans(has_op1, "merge_tensor_scalar")]
    ints = H.edit(KERNEL, "dtype=x.dtype", "dtype=nl.int32")
    H.not_applicable(ints, "merge_tensor_scalar")  # integer dtypes promote differently
    clobber = H.edit(KERNEL, "        w_t = nisa", "        y_t = nl.load(x[0:128, 0:N])\n        w_t = nisa")
    assert "w_t" not in [p["params"]["site"] for p in H.plans(clobber, "merge_tensor_scalar")]
