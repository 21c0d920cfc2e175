"""Rule ``tile_free``: a loop body over a long free dimension processed in chunks, scan state carried."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

KERNEL = H.kernel_source('''
    import numpy as np


    @nki.jit
    def kernel(x, a, b):
        C, L = x.shape
        S = b.shape[0]
        out = nl.ndarray((C, L), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((nl.par_dim(128), L), dtype=x.dtype)
        x_t = nl.load(x[0:128, 0:L])
        for s in nl.affine_range(S):
            a_s = nl.load(a[0:128, s])
            da = nisa.activation(op=nl.sigmoid, data=x_t, scale=a_s)
            b_s = nl.load(b[s:s + 1, 0:L])
            db = nisa.tensor_tensor(x_t, b_s.broadcast_to((128, L)), op=nl.multiply)
            h = nisa.tensor_tensor_scan(da, db, initial=0, op0=np.multiply, op1=np.add)
            acc[0:128, 0:L] += h
        nl.store(out[0:128, 0:L], acc[0:128, 0:L])
        return out
''')

# h_t = sigmoid(x_t a_s) h_{t-1} + x_t b_{s,t}, summed over s (a small, stable mamba), in NumPy
CODE = ("sum(np.stack(__import__('functools').reduce(lambda hs, t: hs + [hs[-1] / (1 + np.exp(-x[:, t] * a[:, s])) "
        "+ x[:, t] * b[s, t]], range(x.shape[1]), [np.zeros(x.shape[0], np.float32)])[1:], axis=1) "
        "for s in range(a.shape[1]))")


def test_tile_free_chunks_the_scan_and_stays_correct():
    ref = H.reference("x, a, b", CODE, [(128, 1024), (128, 2), (2, 1024)])
    sites = sorted(p["id"] for p in H.plans(KERNEL, "tile_free"))
    assert sites == ["tile_free:L/1024@s", "tile_free:L/2048@s", "tile_free:L/512@s"], sites
    new, before, after = H.check(KERNEL, ref, "tile_free", faster=False, site="L/512@s")
    assert "for L_t in nl.static_range(L // 512):" in new, new
    assert "da = nisa.activation(op=nl.sigmoid, data=x_t[:, L_0:L_0 + 512], scale=a_s)" in new, new
    assert "initial=h_carry" in new and "h_carry[...] = nl.copy(h[:, 512 - 1:512])" in new, new
    # the chunk size must divide the extent: the kernel's own assert refuses 2048 > 1024
    bad, _ = H.rewrite(KERNEL, "tile_free", "L/2048@s")
    assert H.run(bad, ref)["correct"] is False


def test_tile_free_keeps_a_later_front_statement_before_the_chunks():
    # x_t is loaded inside the loop (chunked) before a_s (stays in front): the chunk loop follows a_s
    inside = H.edit(H.edit(KERNEL, "    x_t = nl.load(x[0:128, 0:L])\n", ""), "        a_s = nl.load(a[0:128, s])",
                    "        x_t = nl.load(x[0:128, 0:L])\n        a_s = nl.load(a[0:128, s])")
    ref = H.reference("x, a, b", CODE, [(128, 1024), (128, 2), (2, 1024)])
    new, _b, _a = H.check(inside, ref, "tile_free", faster=False, site="L/512@s")
    lines = [ln.strip() for ln in new.splitlines()]
    assert lines.index("a_s = nl.load(a[0:128, s])") < lines.index("for L_t in nl.static_range(L // 512):"), new
    assert "x_t = nl.load(x[0:128, L_0:L_0 + 512])" in lines, new


def test_tile_free_refusals():
    # a reduction along the free dimension cannot be chunked
    H.not_applicable(H.edit(KERNEL, "acc[0:128, 0:L] += h", "acc[0:128, 0:L] += nl.sum(h, axis=[1])"), "tile_free")
    # a scan that already has a state, or a tile used after the loop
    H.not_applicable(H.edit(KERNEL, "initial=0", "initial=a_s"), "tile_free")
    H.not_applicable(H.edit(KERNEL, "    nl.store(out", "    nl.store(out[0:128, 0:1], h[0:128, 0:1])\n"
                            "    nl.store(out"), "tile_free")


def test_tile_free_proposes_only_chunks_that_divide_a_known_extent():
    from accelopt.rules import propose
    # L = x.shape[1]: with the arguments' shapes, 1536 = 3 x 512 takes chunks of 512 only (1024 and
    # 2048 do not divide it; a chunk as wide as L would split nothing)
    def chunks(shapes):
        plans = propose({"source": KERNEL, "max_plans": 100, "input_shapes": shapes})["plans"]
        return sorted(p["params"]["chunk"] for p in plans if p["rule"] == "tile_free")

    assert chunks([[128, 1536], [128, 2], [2, 1536]]) == [512]
    assert chunks([[128, 2048], [128, 2], [2, 2048]]) == [512, 1024]
    assert chunks([[128, 7168], [128, 16], [16, 7168]]) == [512, 1024]  # mamba's seq_len
    assert chunks([]) == [512, 1024, 2048]  # shapes unknown: every size, the kernel's assert decides
    bad = propose({"source": KERNEL, "input_shapes": [[128, "L"]]})
    assert bad["plans"] == [] and bad["error"]["kind"] == "bad_request"


def test_shape_value_reads_tuple_and_indexed_shape_bindings():
    import ast

    from accelopt.rules import analysis
    from accelopt.rules.source import Source
    src = Source(KERNEL)
    src.input_shapes = [[128, 1536], [128, 2], [2, 1536]]
    func = next(n for n in ast.walk(src.tree) if isinstance(n, ast.FunctionDef) and n.name == "kernel")
    assert analysis.shape_value(src, func, "L") == 1536 and analysis.shape_value(src, func, "C") == 128
    assert analysis.shape_value(src, func, "S") == 2  # S = b.shape[0]
    assert analysis.shape_value(src, func, "out") is None  # not bound from a shape
    src.input_shapes = [[128]]  # fewer dimensions than the binding names
    assert analysis.shape_value(src, func, "L") is None


def test_tile_free_slices_a_full_width_tile_from_outside_that_is_broadcast():
    # b's row is loaded once, outside the state loop (the published mamba loads C_i like this): its
    # broadcast must take the chunk's slice, not the whole row
    outside = H.edit(H.edit(KERNEL, "        b_s = nl.load(b[s:s + 1, 0:L])\n", ""), "    x_t = nl.load(x[0:128, 0:L])\n",
                     "    x_t = nl.load(x[0:128, 0:L])\n    b_s = nl.load(b[0:1, 0:L])\n")
    ref = H.reference("x, a, b", CODE.replace("b[s, t]", "b[0, t]"), [(128, 1024), (128, 2), (2, 1024)])
    new, _b, _a = H.check(outside, ref, "tile_free", faster=False, site="L/512@s")
    assert "b_s[:, L_0:L_0 + 512].broadcast_to((128, 512))" in new, new
