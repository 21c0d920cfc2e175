"""Rules ``fuse_reciprocal`` and ``reciprocal_to_scalar``."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

KERNEL = H.kernel_source('''
    @nki.jit
    def kernel(a, d):
        M, N = a.shape
        out = nl.ndarray((M, N), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // 128):
            a_t = nl.load(a[i * 128:(i + 1) * 128, 0:N])
            d_t = nl.load(d[i * 128:(i + 1) * 128, 0:N])
            # r = 1 / d
            r_t = nisa.reciprocal(d_t)
            y_t = nl.multiply(a_t, r_t)
            nl.store(out[i * 128:(i + 1) * 128, 0:N], value=y_t)
        return out
''')
SOFTMAX_TAIL = H.kernel_source('''
    @nki.jit
    def kernel(a):
        M, N = a.shape
        out = nl.ndarray((M, N), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // 128):
            a_t = nl.load(a[i * 128:(i + 1) * 128, 0:N])
            row_sum = nl.sum(a_t, axis=[1], keepdims=True)
            res = nisa.tensor_scalar(data=a_t, op0=nl.multiply, operand0=nisa.reciprocal(row_sum))
            nl.store(out[i * 128:(i + 1) * 128, 0:N], value=res)
        return out
''')


def _ref():
    return H.reference("a, d", "a / d", [(256, 1024), (256, 1024)], positive=[False, True])


def test_fuse_reciprocal_multiply_into_divide():
    # Correctness only: the calibrated cost model prices nl.divide like the
    # reciprocal + multiply the compiler lowers it to, so there is no
    # modelled speed-up to assert (the rewrite still removes an instruction).
    new, before, after = H.check(KERNEL, _ref(), "fuse_reciprocal", faster=False)
    assert "y_t = nl.divide(a_t, d_t)" in new and "reciprocal" not in new, new
    assert "# r = 1 / d" not in new  # the deleted statement's comment goes with it


def test_fuse_reciprocal_tensor_scalar_form():
    ref = H.reference("a", "a / a.sum(axis=1, keepdims=True)", [(256, 512)], positive=[True])
    new, _before, _after = H.check(SOFTMAX_TAIL, ref, "fuse_reciprocal", faster=False)
    assert "op0=nl.divide, operand0=row_sum" in new, new


def test_fuse_reciprocal_refuses_shared_or_clobbered_reciprocal():
    shared = H.edit(KERNEL, "value=y_t)", "value=nl.add(y_t, r_t))")
    H.not_applicable(shared, "fuse_reciprocal")  # r_t is read twice
    clobbered = H.edit(KERNEL, "        y_t = nl.multiply", "        d_t = nl.load(a[0:128, 0:N])\n"
                       "        y_t = nl.multiply")
    H.not_applicable(clobbered, "fuse_reciprocal")  # d_t changes between reciprocal and multiply
    in_place = H.edit(KERNEL, "        y_t = nl.multiply", "        d_t[0:128, 0:1] = a_t[0:128, 0:1]\n"
                      "        y_t = nl.multiply")
    H.not_applicable(in_place, "fuse_reciprocal")
    with_dtype = H.edit(KERNEL, "nl.multiply(a_t, r_t)", "nl.multiply(a_t, r_t, dtype=nl.bfloat16)")
    H.not_applicable(with_dtype, "fuse_reciprocal")  # dtype=float32 alone is a no-op (float32 kernels)


def test_reciprocal_to_scalar_engine():
    # Correctness only: whether ScalarE wins depends on how busy each engine
    # is in the calibrated schedule, which this tiny kernel does not pin down.
    new, before, after = H.check(KERNEL, _ref(), "reciprocal_to_scalar", faster=False)
    assert "r_t = nisa.activation(op=nl.reciprocal, data=d_t)" in new, new
    H.not_applicable(H.edit(KERNEL, "nisa.reciprocal(d_t)", "nl.reciprocal(d_t)"), "reciprocal_to_scalar")
