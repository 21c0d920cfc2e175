"""Reading an NKIBench directory (``summary.json`` in AccelOpt's format).

``summary.json``: {problem: {"seed": "./seeds/<p>.yaml", optional "rel_tol",
"cases": {case_id: {"values": {dim: int}, "impls": [{"task", "kernel"}]}}}};
paths are relative to the directory holding summary.json.
"""
import json
import os
from dataclasses import dataclass

DEFAULT_REL_TOL = 2e-5


@dataclass(frozen=True)
class Case:
    """One (problem, case, impl) of an NKIBench directory; paths are absolute."""

    problem: str
    case_id: str
    values: dict
    task: str
    kernel: str
    seed: str
    rel_tol: float

    @property
    def case_name(self):
        """AccelOpt's case name: problem + "_<DIM><value>" for dims in sorted order (str)."""
        return self.problem + "".join(f"_{k}{self.values[k]}" for k in sorted(self.values))

# Tolerances AccelOpt's harness applies to the published NKIBench, whose
# summary.json does not carry them (docs/trainium.md, "Tolerances").
PUBLISHED_REL_TOL = {"mamba": 3e-5}


def default_root():
    """Returns the repository's ``nkibench`` directory (absolute path, str)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "..", "nkibench"))


def load_summary(root=None):
    """Returns the parsed ``summary.json`` of ``root`` (default: default_root()).

    Raises OSError / json.JSONDecodeError on a missing or malformed file.
    """
    root = root or default_root()
    with open(os.path.join(root, "summary.json"), encoding="utf-8") as handle:
        return json.load(handle)


def iter_cases(root=None, problems=None, case_ids=None):
    """Returns a list of Case for every impl in ``root``'s summary.

    ``problems`` / ``case_ids``: optional collections to filter on (str).
    Raises KeyError if an entry lacks a required field.
    """
    root = root or default_root()
    summary = load_summary(root)
    cases = []
    for problem, entry in summary.items():
        if problems is not None and problem not in problems:
            continue
        rel_tol = float(entry.get("rel_tol", PUBLISHED_REL_TOL.get(problem, DEFAULT_REL_TOL)))
        seed = os.path.normpath(os.path.join(root, entry["seed"]))
        for case_id, case in entry["cases"].items():
            if case_ids is not None and case_id not in case_ids:
                continue
            for impl in case["impls"]:
                cases.append(Case(problem, case_id, dict(case["values"]),
                                  os.path.normpath(os.path.join(root, impl["task"])),
                                  os.path.normpath(os.path.join(root, impl["kernel"])),
                                  seed, rel_tol))
    return cases


def profile_request(case, backend="emulator", target="trn1", timing=True):
    """Returns a profile_kernel request dict for ``case`` (its paths and rel_tol)."""
    return {"kernel": case.kernel, "reference": case.task, "backend": backend, "target": target,
            "rel_tol": case.rel_tol, "timing": timing}
