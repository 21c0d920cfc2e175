"""Move coverage of the NKIBench baselines (issue 17: >= 5 applicable moves per baseline).

The known shortfalls are listed with the count they have now, so that a
regression fails and closing a gap is visible. The published NKIBench (not in
this repository) is checked when ACCELOPT_PUBLISHED_NKIBENCH names its directory.
"""
import os

from accelopt.rules import coverage as C

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "nkibench")
# problem -> plans proposed now, where below the target (docs/rules.md, "Coverage")
OURS_SHORT = {}
PUBLISHED_SHORT = {}


def _check(root, short):
    rows = [r for r in C.coverage(root) if r["case"] != "small"]
    assert len(rows) == 14, [r["problem"] for r in rows]
    for r in rows:
        need = short.get(r["problem"], C.TARGET)
        assert r["plans"] >= need, f"{r['problem']}: {r['plans']} moves, expected >= {need} ({r['rules']})"


def test_repository_baselines_offer_moves():
    _check(REPO, OURS_SHORT)


def test_published_baselines_offer_moves():
    root = os.environ.get("ACCELOPT_PUBLISHED_NKIBENCH")
    if not root:
        return  # the published NKIBench is not part of the repository
    _check(root, PUBLISHED_SHORT)
