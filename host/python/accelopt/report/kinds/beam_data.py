"""The data of an optimization run (beam search), read from the files its stages write.

Sources (docs/optimize.md, "Candidates and records"):

* ``optimize_report.json``: per case the original and best latency, speedup,
  % of peak before/after, the winner's id, lineage and history, candidate
  counts and LLM usage (``native:optimize_report``; absent when the run
  stopped before it);
* ``optimize/records.jsonl``: every candidate in the order it was scored;
* ``beam.json`` / ``best.json`` in stage folders: beam members and the best
  kernel per case, with their ``metrics`` (baselines come from the init
  stage's ``beam.json``);
* the loop's profile items (``stages/*/iter-*/*/item-*``): each candidate's
  profile folder, found through the for_each stage's ``outputs.json``.
"""
import collections
import math
import os
import re


class BeamRun:
    """Everything the beam report shows, indexed by case and candidate id."""

    def __init__(self, run):
        """Reads ``run`` (a RunFiles); missing files leave the matching parts empty."""
        self.run = run
        self.report = run.json("optimize_report.json", {})
        self.records = run.jsonl("optimize/records.jsonl")
        self.records_by_id = {r.get("id"): r for r in self.records if r.get("id")}
        self._by_case = collections.defaultdict(list)
        for record in self.records:
            self._by_case[record.get("case_name")].append(record)
        self.entries = {}  # candidate id -> beam/best entry (with metrics)
        for path in run.glob("stages/*/beam.json") + run.glob("stages/*/iter-*/*/beam.json"):
            for entry in _as_list(run.json(path, [])):
                self.entries.setdefault(entry.get("id"), entry)
        self.best = {}  # case -> best entry of the last iteration that wrote best.json
        for path in run.glob("stages/*/iter-*/*/best.json"):
            best = run.json(path, {})
            if isinstance(best, dict):
                self.best.update({k: v for k, v in best.items() if isinstance(v, dict)})
        for entry in self.best.values():
            self.entries[entry.get("id")] = entry
        self.rows = self._rows()

    def _rows(self):
        """Per-case rows: optimize_report.json's, else rebuilt from the records and baselines."""
        rows = [r for r in _as_list(self.report.get("rows")) if r.get("case_name")]
        if rows:
            return rows
        cases = collections.OrderedDict()
        for entry in self.entries.values():
            if entry.get("origin") == "baseline" and entry.get("case_name"):
                cases.setdefault(entry["case_name"], {"case_name": entry["case_name"], "problem": entry.get("problem", ""),
                                                      "original_latency_ms": entry.get("latency_ms")})
        for record in self.records:
            case = cases.setdefault(record.get("case_name"), {"case_name": record.get("case_name"),
                                                              "problem": record.get("problem", ""),
                                                              "original_latency_ms": record.get("baseline_latency_ms")})
            if case.get("original_latency_ms") is None:
                case["original_latency_ms"] = record.get("baseline_latency_ms")
        for name, case in cases.items():
            best = self.best.get(name)
            original = case.get("original_latency_ms")
            latency = best.get("latency_ms") if best else original
            case["best_latency_ms"] = latency
            case["speedup"] = original / latency if original and latency else None
            case["status"] = "improved" if best and best.get("origin") != "baseline" and latency < original else "no_improvement"
            if best:
                case["winner"] = {k: best.get(k) for k in ("id", "origin", "lineage", "history")}
        return list(cases.values())

    def case_names(self):
        """The cases in report order."""
        return [row["case_name"] for row in self.rows]

    def geomean_speedup(self):
        """optimize_report.json's geomean, else the geomean of the rows' speedups (None when none)."""
        if isinstance(self.report.get("geomean_speedup"), (int, float)):
            return float(self.report["geomean_speedup"])
        speedups = [r["speedup"] for r in self.rows if isinstance(r.get("speedup"), (int, float)) and r["speedup"] > 0]
        return math.exp(sum(math.log(s) for s in speedups) / len(speedups)) if speedups else None

    def baseline(self, case_name):
        """The baseline beam entry of a case (id ``<case>_ID0``), or {}."""
        entry = self.entries.get(f"{case_name}_ID0")
        if entry:
            return entry
        for entry in self.entries.values():
            if entry.get("case_name") == case_name and entry.get("origin") == "baseline":
                return entry
        return {}

    def winner(self, row):
        """The best entry of a row's case (with metrics when a best.json holds it), or the baseline."""
        winner_id = (row.get("winner") or {}).get("id")
        return self.entries.get(winner_id) or self.best.get(row["case_name"]) or self.baseline(row["case_name"])

    def kernel_text(self, path):
        """The source of a kernel the run names, when it is a regular file inside the run (else "")."""
        return self.run.text(path, "") if path else ""

    def baseline_text(self, case_name):
        """The source of a case's baseline: the file its beam entry names when that lies inside the run,
        else the copy native:optimize_init keeps (``stages/*/baselines/<case>.py``); "" when neither.
        The original (e.g. NKIBench's kernel) is outside the run and never read."""
        text = self.kernel_text(self.baseline(case_name).get("kernel"))
        if text:
            return text
        for path in self.run.glob(os.path.join("stages", "*", "baselines", _safe_name(case_name) + ".py")):
            text = self.run.text(path, "")
            if text:
                return text
        return ""

    def records_of(self, case_name):
        """The case's records in scoring order."""
        return self._by_case.get(case_name, [])

    def progress(self, case_name):
        """(candidates evaluated, best speedup vs baseline so far) points, starting at (0, 1.0)."""
        xs, ys, best = [0], [1.0], 1.0
        for count, record in enumerate(self.records_of(case_name), start=1):
            speedup = record.get("speedup_vs_baseline")
            if record.get("status") == "ok" and isinstance(speedup, (int, float)):
                best = max(best, float(speedup))
            xs.append(count)
            ys.append(best)
        return xs, ys

    def outcomes(self, case_name):
        """Counter of outcomes of the case's candidates: ``correct`` or the error kind."""
        counter = collections.Counter()
        for record in self.records_of(case_name):
            if record.get("status") == "ok":
                counter["correct"] += 1
            else:
                counter[(record.get("error") or {}).get("kind") or "failed"] += 1
        return counter

    def profile_dirs(self):
        """Candidate id -> run-relative folder of its profile item in the loop."""
        found = {}
        for outputs in self.run.glob("stages/*/iter-*/*/outputs.json"):
            folder = os.path.dirname(outputs)
            if not os.path.isdir(self.run.path(os.path.join(folder, "item-0000"))):
                continue
            for index, item in enumerate(_as_list(self.run.load_json(outputs))):  # not cached: large
                case = item.get("case") or item.get("item") or {}
                if isinstance(case, dict) and case.get("id"):
                    found.setdefault(case["id"], os.path.join(folder, f"item-{index:04d}"))
        return found


def _safe_name(text):
    """File name of a case as plugins/optimize's SafeName makes it: [A-Za-z0-9._-], others '_'."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


def _as_list(value):
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
