"""Rule ``hoist_load``: loop-invariant loads move in front of their loop."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

KERNEL = H.kernel_source('''
    @nki.jit
    def kernel(x, g):
        M, N = x.shape
        out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // 128):
            x_t = nl.load(x[i * 128:(i + 1) * 128, 0:N])
            # the gain tile is the same for every row block
            g_t = nl.load(g[0:128, 0:N])
            nl.store(out[i * 128:(i + 1) * 128, 0:N], value=nl.multiply(x_t, g_t))
        return out
''')


def test_hoist_moves_invariant_load_and_stays_correct():
    ref = H.reference("x, g", "x * np.tile(g, (4, 1))", [(512, 512), (128, 512)])
    sites = [p["params"]["site"] for p in H.plans(KERNEL, "hoist_load")]
    assert sites == ["g_t@i"], sites  # x_t depends on i: not hoisted
    new, before, after = H.check(KERNEL, ref, "hoist_load", faster=False)
    lines = new.splitlines()
    hoisted = lines.index("    g_t = nl.load(g[0:128, 0:N])")
    assert hoisted < lines.index("    for i in nl.affine_range(M // 128):"), new
    assert lines[hoisted - 1] == "    # the gain tile is the same for every row block"  # its comment moves along
    # the emulator already deduplicates resident loads (nki-facts §3.4), so the estimate must not get worse
    assert after <= before * 1.0001, (before, after)


def test_hoist_refuses_when_not_invariant():
    stored = H.edit(KERNEL, "value=nl.multiply(x_t, g_t))", "value=nl.multiply(x_t, g_t))\n"
                    "        nl.store(g[0:128, 0:N], value=x_t)")
    H.not_applicable(stored, "hoist_load")  # g is written in the loop
    used_after = H.edit(KERNEL, "    return out", "    nl.store(out[0:128, 0:N], value=g_t)\n    return out")
    H.not_applicable(used_after, "hoist_load")  # g_t is used after the loop
    written = H.edit(KERNEL, "        nl.store(out", "        g_t[0:1, 0:N] = x_t[0:1, 0:N]\n"
                     "        nl.store(out")
    H.not_applicable(written, "hoist_load")  # g_t is modified in place
    helper = H.edit(KERNEL, "        nl.store(out", "        helper(g)\n        nl.store(out")
    H.not_applicable(helper, "hoist_load")  # a helper call might store into g
    rebound = H.edit(KERNEL, "g_t = nl.load(g[0:128, 0:N])", "g_t = nl.load(g[0:128, 0:N])\n"
                     "        N = N + 0")
    H.not_applicable(rebound, "hoist_load")  # the index reads a name bound in the loop
