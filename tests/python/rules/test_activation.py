"""Rules ``fuse_sigmoid``, ``fuse_silu`` and ``square_to_activation``."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

SILU = H.kernel_source('''
    @nki.jit
    def kernel(x):
        M, N = x.shape
        out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // 128):
            x_t = nl.load(x[i * 128:(i + 1) * 128, 0:N])
            e_t = nisa.activation(op=nl.exp, data=x_t, scale=-1.0)
            d_t = nisa.tensor_scalar(data=e_t, op0=nl.add, operand0=1.0)
            y_t = nl.multiply(x_t, nisa.reciprocal(d_t))
            nl.store(out[i * 128:(i + 1) * 128, 0:N], value=y_t)
        return out
''')
SQUARE = H.kernel_source('''
    @nki.jit
    def kernel(x):
        M, N = x.shape
        out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // 128):
            x_t = nl.load(x[i * 128:(i + 1) * 128, 0:N])
            nl.store(out[i * 128:(i + 1) * 128, 0:N], value=nl.multiply(x_t, x_t))
        return out
''')


def _silu_ref():
    return H.reference("x", "x / (1 + np.exp(-x))", [(256, 1024)])


def test_fuse_silu_whole_chain():
    new, before, after = H.check(SILU, _silu_ref(), "fuse_silu")
    assert "y_t = nisa.activation(op=nl.silu, data=x_t)" in new, new
    assert "e_t" not in new and "d_t" not in new  # the temps are gone


def test_fuse_sigmoid_then_silu():
    sig, before, mid = H.check(SILU, _silu_ref(), "fuse_sigmoid")
    assert "nl.multiply(x_t, nisa.activation(op=nl.sigmoid, data=x_t))" in sig, sig
    final, _mid, after = H.check(sig, _silu_ref(), "fuse_silu")
    assert "y_t = nisa.activation(op=nl.silu, data=x_t)" in final


def test_fuse_silu_divide_form():
    divided = H.edit(SILU, "nl.multiply(x_t, nisa.reciprocal(d_t))", "nl.divide(x_t, d_t)")
    new, _before, _after = H.check(divided, _silu_ref(), "fuse_silu")
    assert "nisa.activation(op=nl.silu, data=x_t)" in new


def test_sigmoid_silu_refuse_other_chains():
    H.not_applicable(H.edit(SILU, "scale=-1.0", "scale=-2.0"), "fuse_sigmoid")  # exp(-2x)
    H.not_applicable(H.edit(SILU, "operand0=1.0", "operand0=2.0"), "fuse_silu")  # 1/(2+e)
    other_x = H.edit(SILU, "nl.multiply(x_t, nisa", "nl.multiply(e_t, nisa")
    H.not_applicable(other_x, "fuse_silu")  # e * sigmoid(x) is not silu
    e_reused = H.edit(SILU, "value=y_t)", "value=nl.add(y_t, e_t))")
    H.not_applicable(e_reused, "fuse_sigmoid")  # exp(-x) is still needed elsewhere


def test_square_to_activation():
    ref = H.reference("x", "x * x", [(256, 1024)])
    new, before, after = H.check(SQUARE, ref, "square_to_activation")
    assert "value=nisa.activation(op=nl.square, data=x_t))" in new, new
    H.not_applicable(H.edit(SQUARE, "nl.multiply(x_t, x_t)", "nl.multiply(x_t, nl.exp(x_t))"),
                     "square_to_activation")
    param = H.edit(SQUARE, "nl.multiply(x_t, x_t)", "nl.multiply(x, x)")
    H.not_applicable(param, "square_to_activation")  # x is a parameter: not provably a tile
