"""Move coverage: how many rule plans apply to each kernel of an NKIBench directory.

Used by ``bench/move_coverage.py`` and the coverage test (issue 17: every
published baseline should offer at least ``TARGET`` distinct applicable moves).
"""
import collections

from .. import nkibench
from .api import propose

TARGET = 5


def coverage(root, case_ids=None, problems=None):
    """[{"problem", "case", "kernel", "plans": int, "rules": {rule: count}}] for every case of ``root``.

    ``root``: NKIBench directory (summary.json); ``case_ids``: optional case ids to keep;
    ``problems``: optional problem names. Kernels shared by several cases are listed once
    per case (the moves are the same). Raises OSError/ValueError for a bad directory.
    """
    out = []
    for case in nkibench.iter_cases(root, problems=problems, case_ids=case_ids):
        with open(case.kernel, encoding="utf-8") as handle:
            source = handle.read()
        plans = propose({"source": source, "max_plans": 10000})["plans"]
        out.append({"problem": case.problem, "case": case.case_id, "kernel": case.kernel, "plans": len(plans),
                    "rules": dict(collections.Counter(p["rule"] for p in plans))})
    return out
