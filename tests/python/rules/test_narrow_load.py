"""Rule narrow_load: a whole-tensor load nest of which each consumer iteration reads one column slice
(gqa_full's V, compiler style; docs/rules.md).

out[h] = sum over b of w[b]^T @ x[b][:, 128 h : 128 h + 128], x (4, 128, 1024), w (4, 128, 128): all of x
is loaded up front, and head h reads its 128 columns of every block.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

HEADS = H.kernel_source('''
    import numpy as np


    @nki.jit
    def kernel(v1, v2):
        v3 = nl.ndarray((8, 128, 128), dtype=np.float32, buffer=nl.shared_hbm)
        v4 = nl.ndarray((4, nl.par_dim(128), 1024), dtype=np.float32, name='x_local', buffer=nl.sbuf)
        v5 = nl.ndarray((4, nl.par_dim(128), 128), dtype=np.float32, name='w_local', buffer=nl.sbuf)
        v6 = nl.zeros((8, nl.par_dim(128), 128), dtype=np.float32, name='', buffer=nl.psum, lazy_initialization=True)
        v7 = nl.ndarray((8, nl.par_dim(128), 128), dtype=np.float32, name='', buffer=nl.sbuf)
        for i0 in nl.affine_range(4):
            v4[i0, nl.arange(128)[:, None], nl.arange(1024)[None, :]] = nl.load(v1[i0, nl.arange(128)[:, None], nl.arange(1024)[None, :]], dtype=np.float32, mask=None)
            ' end loop i0 '
        for i1 in nl.affine_range(4):
            v5[i1, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(v2[i1, nl.arange(128)[:, None], nl.arange(128)[None, :]], dtype=np.float32, mask=None)
        for i2 in nl.affine_range(8):
            for i3 in nl.affine_range(4):
                v6[i2, nl.arange(128)[:, None], nl.arange(128)[None, :]] += nisa.nc_matmul(v5[i3, nl.arange(128)[:, None], nl.arange(128)[None, :]], v4[i3, nl.arange(128)[:, None], 128 * i2 + nl.arange(128)[None, :]], is_stationary_onezero=False, is_moving_onezero=False, mask=None)
            v7[i2, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.copy(v6[i2, nl.arange(128)[:, None], nl.arange(128)[None, :]], dtype=np.float32, mask=None)
            nl.store(v3[i2, nl.arange(128)[:, None], nl.arange(128)[None, :]], value=v7[i2, nl.arange(128)[:, None], nl.arange(128)[None, :]], mask=None)
        return v3
''')
HEADS_REF = ("x, w", 'np.einsum("bkm,bkhn->hmn", w, x.reshape(4, 128, 8, 128))', [(4, 128, 1024), (4, 128, 128)])


def _sites(source):
    return sorted(p["params"]["site"] for p in H.plans(source, "narrow_load"))


def test_narrow_load_loads_each_slice_inside_its_loop_and_is_correct():
    ref = H.reference(*HEADS_REF)
    assert _sites(HEADS) == ["v4@i2"]
    new, plan = H.rewrite(HEADS, "narrow_load")
    assert plan["params"]["width"] == 128 and plan["params"]["growth"] == 1.0, plan
    assert "v4 = nl.ndarray((8, 4, nl.par_dim(128), 128), " in new, new
    assert "    for i2 in nl.affine_range(8):\n        for i0 in nl.affine_range(4):\n" \
           "            v4[i2, i0, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(v1[i0, " \
           "nl.arange(128)[:, None], 128 * i2 + nl.arange(128)[None, :]]" in new, new
    assert "v4[i2, i3, nl.arange(128)[:, None], nl.arange(128)[None, :]], is_stationary_onezero" in new, new
    before, after = H.run(HEADS, ref), H.run(new, ref)
    H.ok(before)
    H.ok(after)
    # the same bytes, loaded per head
    assert after["metrics"]["hbm_read_bytes"] == before["metrics"]["hbm_read_bytes"], (before["metrics"],
                                                                                       after["metrics"])


def test_narrow_load_refusals():
    # two offsets: no single slice per iteration
    two = H.edit(HEADS, "v7[i2, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.copy(v6[i2, nl.arange(128)[:, None], nl.arange(128)[None, :]]",
                 "v7[i2, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.add(v6[i2, nl.arange(128)[:, None], nl.arange(128)[None, :]], v4[0, nl.arange(128)[:, None], nl.arange(128)[None, :]]")
    # the whole width is read: nothing to narrow
    whole = H.edit(HEADS, "128 * i2 + nl.arange(128)[None, :]], is_stationary", "nl.arange(1024)[None, :]], is_stationary")
    # a masked load
    masked = H.edit(HEADS, "nl.arange(1024)[None, :]], dtype=np.float32, mask=None)",
                    "nl.arange(1024)[None, :]], dtype=np.float32, mask=nl.arange(1024)[None, :] < 1000)")
    # the offset's loop variable is the load's own: the nest cannot move into that loop
    clash = H.edit(HEADS, "for i2 in nl.affine_range(8):\n        for i3 in nl.affine_range(4):",
                   "for i2 in nl.affine_range(8):\n        for i0 in nl.affine_range(4):")
    clash = clash.replace("v5[i3, nl.arange(128)[:, None], nl.arange(128)[None, :]], v4[i3,",
                          "v5[i0, nl.arange(128)[:, None], nl.arange(128)[None, :]], v4[i0,")
    for bad in (two, whole, masked, clash):
        H.not_applicable(bad, "narrow_load")


def test_narrow_load_refuses_more_than_four_times_the_bytes():
    # the heads inside an outer loop of 8 that the offset mentions: 8 x 8 x 128 / 1024 = 8x the bytes (limit 4x)
    outer = H.edit(HEADS, "    for i2 in nl.affine_range(8):\n", "    for i9 in nl.affine_range(8):\n        for i2 in nl.affine_range(8):\n")
    assert outer != HEADS
    lines = outer.split("\n")
    start = next(i for i, line in enumerate(lines) if "for i9 in" in line) + 2
    end = next(i for i, line in enumerate(lines) if line.strip() == "return v3")
    lines[start:end] = ["    " + line for line in lines[start:end]]
    outer = "\n".join(lines).replace("128 * i2 + nl.arange(128)", "128 * i2 + 0 * i9 + nl.arange(128)")
    H.not_applicable(outer, "narrow_load")
