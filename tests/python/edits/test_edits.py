"""accelopt.edits: unified diffs of kernels made with difflib, applied strictly
(context must match, errors name the hunk), and the executor's diff-or-source
resolution with its fallback."""
from accelopt import edits

KERNEL = """import nki.language as nl


def kernel(x, out):
    t = nl.load(x[0:128, 0:512])
    s = nl.exp(t)
    r = nl.multiply(s, 2.0)
    nl.store(out[0:128, 0:512], value=r)
"""

FUSED = KERNEL.replace("    s = nl.exp(t)\n    r = nl.multiply(s, 2.0)\n", "    r = nl.multiply(nl.exp(t), 2.0)\n")


def _raises(fn, kind, *needles):
    try:
        fn()
    except edits.PatchError as exc:
        assert exc.kind == kind, exc.kind
        for needle in needles:
            assert needle in str(exc), str(exc)
        return
    raise AssertionError("no PatchError")


def test_difflib_diff_round_trips():
    diff = edits.make_diff(KERNEL, FUSED)
    assert diff.startswith("--- a/kernel.py\n+++ b/kernel.py\n@@ ")
    assert edits.apply(KERNEL, diff) == FUSED
    assert edits.make_diff(KERNEL, KERNEL) == ""


def test_model_style_hunk_without_headers_and_wrong_counts_applies():
    # No ---/+++ lines, a bare @@, an empty context line without its space.
    diff = "@@\n def kernel(x, out):\n     t = nl.load(x[0:128, 0:512])\n-    s = nl.exp(t)\n-    r = nl.multiply(s, 2.0)\n" \
           "+    r = nl.multiply(nl.exp(t), 2.0)\n     nl.store(out[0:128, 0:512], value=r)\n"
    assert edits.apply(KERNEL, diff) == FUSED
    wrong_counts = "@@ -40,99 +40,1 @@\n-    s = nl.exp(t)\n-    r = nl.multiply(s, 2.0)\n+    r = nl.multiply(nl.exp(t), 2.0)\n"
    assert edits.apply(KERNEL, wrong_counts) == FUSED


def test_context_must_match_and_the_error_names_the_hunk():
    ok = "@@ -5,1 +5,1 @@\n-    t = nl.load(x[0:128, 0:512])\n+    t = nl.load(x[0:128, 0:512]) \n"
    bad = "@@ -6,2 +6,1 @@\n-    s = nl.exp(u)\n-    r = nl.multiply(s, 2.0)\n+    r = 0\n"
    _raises(lambda: edits.apply(KERNEL, ok + bad), "hunk_failed", "hunk 2", "@@ -6,2 +6,1 @@", "s = nl.exp(u)")
    # Hunks apply in order: a hunk whose lines only occur before the previous one fails.
    first = "@@ -7,1 +7,1 @@\n-    r = nl.multiply(s, 2.0)\n+    r = nl.multiply(s, 3.0)\n"
    second = "@@ -5,1 +5,1 @@\n-    t = nl.load(x[0:128, 0:512])\n+    t = nl.load(x[0:128, 0:256])\n"
    _raises(lambda: edits.apply(KERNEL, first + second), "hunk_failed", "hunk 2", "after the previous hunk")


def test_nearest_occurrence_to_the_hinted_line_wins():
    src = "a = 1\nb = 2\na = 1\nb = 2\n"
    assert edits.apply(src, "@@ -3,2 +3,2 @@\n a = 1\n-b = 2\n+b = 3\n") == "a = 1\nb = 2\na = 1\nb = 3\n"
    assert edits.apply(src, "@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 3\n") == "a = 1\nb = 3\na = 1\nb = 2\n"


def test_pure_addition_and_bad_diffs():
    assert edits.apply("a\nb\n", "@@ -1,0 +2,1 @@\n+c\n") == "a\nc\nb\n"
    _raises(lambda: edits.apply(KERNEL, "just prose\n"), "bad_diff", "no hunk")
    _raises(lambda: edits.apply(KERNEL, "@@ -1,1 +1,1 @@\n import nki.language as nl\n"), "bad_diff", "hunk 1")
    assert edits.looks_like_diff("x\n@@ -1 +1 @@\n-a\n+b\n")
    assert not edits.looks_like_diff(KERNEL)


def test_resolve_prefers_the_diff_and_falls_back_to_the_full_source():
    diff = edits.make_diff(KERNEL, FUSED)
    out = edits.resolve({"parent": KERNEL, "diff": diff, "source": "ignored"})
    assert out["edit"] == "diff" and out["source"] == FUSED and out["diff"] == diff
    broken = "@@ -6,1 +6,1 @@\n-    s = nl.exp(y)\n+    s = nl.exp(t)\n"
    out = edits.resolve({"parent": KERNEL, "diff": broken, "source": FUSED})
    assert out["edit"] == "source" and out["source"] == FUSED
    assert out["patch_error"]["kind"] == "hunk_failed" and "hunk 1" in out["patch_error"]["message"]
    assert out["diff"] == edits.make_diff(KERNEL, FUSED)
    out = edits.resolve({"parent": KERNEL, "diff": broken, "source": None})
    assert out["error"]["kind"] == "patch_failed" and "no full kernel" in out["error"]["message"]
    assert edits.resolve({"parent": KERNEL})["error"]["kind"] == "no_code"
    assert edits.resolve({"diff": diff})["error"]["kind"] == "bad_request"
