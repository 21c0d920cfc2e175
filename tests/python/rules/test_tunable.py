"""Rule ``tunable``: declared tunables change value within their choices."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402
from accelopt import rules  # noqa: E402

KERNEL = H.kernel_source('''
    P = 128
    # accelopt: tunable TILE = 128 choices=[128, 256, 512]
    TILE = 128


    @nki.jit
    def kernel(x):
        M, N = x.shape
        assert N % TILE == 0
        out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // P):
            for j in nl.affine_range(N // TILE):
                t = nl.load(x[i * P:(i + 1) * P, j * TILE:(j + 1) * TILE])
                nl.store(out[i * P:(i + 1) * P, j * TILE:(j + 1) * TILE], value=nisa.activation(op=nl.exp, data=t))
        return out
''')


def test_tunable_sets_value_and_comment_and_is_faster():
    ref = H.reference("x", "np.exp(x)", [(256, 512)])
    sites = sorted(p["params"]["site"] for p in H.plans(KERNEL, "tunable"))
    assert sites == ["TILE=256", "TILE=512"], sites
    new, before, after = H.check(KERNEL, ref, "tunable", site="TILE=256")
    assert "# accelopt: tunable TILE = 256 choices=[128, 256, 512]\nTILE = 256\n" in new
    # the rewritten kernel declares the tunable again, now with 128 as an alternative
    assert sorted(p["params"]["site"] for p in H.plans(new, "tunable")) == ["TILE=128", "TILE=512"]


def test_tunable_refuses_malformed_or_foreign_values():
    bad = H.edit(KERNEL, "choices=[128, 256, 512]", "choices=[128, oops]")
    H.not_applicable(bad, "tunable")
    detached = H.edit(KERNEL, "TILE = 128\n\n\n@", "\nTILE = 128\n\n\n@")  # blank line in between
    H.not_applicable(detached, "tunable")
    twice = H.edit(KERNEL, "P = 128\n", "P = 128\nTILE = 64\n")  # bound twice at module level
    H.not_applicable(twice, "tunable")
    forged = rules.apply({"source": KERNEL, "plan": {"rule": "tunable", "params": {"site": "TILE=1024"}}})
    assert forged["error"]["kind"] == "not_applicable", forged


def test_repo_kernels_declare_tunables():
    root = os.path.join(os.path.dirname(H.profile.__file__), "..", "..", "..", "nkibench", "kernels")
    with_tunables = 0
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            with open(os.path.join(root, name), encoding="utf-8") as handle:
                if H.plans(handle.read(), "tunable"):
                    with_tunables += 1
    assert with_tunables >= 3, with_tunables
