"""The data of an optimization run (beam search), read from the files its stages write.

Sources (docs/optimize.md, "Candidates and records"):

* ``optimize_results.json``: per case the original and best latency, speedup,
  % of peak before/after, the winner's id, lineage and history, candidate
  counts and LLM usage (``native:optimize_results``; absent when the run
  stopped before it);
* ``optimize/records.jsonl``: every candidate in the order it was scored;
* ``beam.json`` / ``best.json`` in stage folders: beam members and the best
  kernel per case, with their ``metrics`` (baselines come from the init
  stage's ``beam.json``);
* the loop's profile items (``stages/*/iter-*/*/item-*``): each candidate's
  profile folder, found through the for_each stage's ``outputs.json``, and
  its ``metrics`` (a search that keeps no ``best.json``, the graph search and
  the agent, gets its best kernel's engines and traffic from there);
* ``best/<case>.py``: the winning kernel the results stage copied;
* ``journal.jsonl``: when each profile item finished (time to the best).

The same files are written by the beam search, the graph search and the
agent (they share native:score and native:optimize_results), so the three
kinds read them through this class.
"""
import collections
import hashlib
import math
import os
import re

from .. import run_files


class BeamRun:
    """Everything the beam report shows, indexed by case and candidate id."""

    def __init__(self, run):
        """Reads ``run`` (a RunFiles); missing files leave the matching parts empty."""
        self.run = run
        # optimize_report.json: the file's name in runs made before it was renamed (docs/architecture.md, "Words")
        self.report = run.json("optimize_results.json", None) or run.json("optimize_report.json", {})
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
        self._profile_dirs = None
        self._scored_metrics = None
        self.rows = self._rows()

    def _rows(self):
        """Per-case rows: optimize_results.json's, else rebuilt from the records and baselines."""
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
        """optimize_results.json's geomean, else the geomean of the rows' speedups (None when none)."""
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
        """The best kernel of a row's case: its beam/best entry, else its scored record with the metrics
        of its profile (graph search, agent: no best.json); the baseline when the baseline stayed best."""
        winner_id = (row.get("winner") or {}).get("id")
        baseline = self.baseline(row["case_name"])
        if not winner_id or winner_id == baseline.get("id") or row.get("status") not in (None, "improved"):
            return self.entries.get(winner_id) or self.best.get(row["case_name"]) or baseline
        entry = dict(self.entries.get(winner_id) or self.records_by_id.get(winner_id) or {})
        if not entry:
            return self.best.get(row["case_name"]) or baseline
        if not entry.get("metrics"):
            metrics = self.metrics_of(winner_id)
            if metrics:
                entry["metrics"] = metrics
        return entry

    def metrics_of(self, candidate_id):
        """The profile metrics of a candidate: its profile item's outputs, else native:score's
        executor_results.json (records.jsonl leaves them out); {} when neither has them."""
        folder = self.profile_dirs().get(candidate_id)
        if folder:
            result = self.run.load_json(os.path.join(folder, "outputs.json"))
            if isinstance(result, dict) and isinstance(result.get("metrics"), dict) and result["metrics"]:
                return result["metrics"]
        if self._scored_metrics is None:
            self._scored_metrics = {}
            for path in self.run.glob("stages/*/iter-*/*/executor_results.json"):
                for record in _as_list(self.run.load_json(path)):
                    if record.get("id") and isinstance(record.get("metrics"), dict):
                        self._scored_metrics.setdefault(record["id"], record["metrics"])
        return self._scored_metrics.get(candidate_id, {})

    def best_kernel(self, row):
        """Run-relative path of the case's best kernel: ``best/<case>.py`` (what the run copied) when the
        case improved and that file is there, else the winner's kernel."""
        if row.get("status") == "improved":
            copy = os.path.join("best", _safe_name(row["case_name"]) + ".py")
            if self.run.exists(copy):
                return copy
        kernel = self.winner(row).get("kernel") or row.get("kernel")
        return self.run.inside(kernel) if kernel else None

    def best_kernel_sha256(self, row):
        """SHA-256 (hex) of the best kernel's file, or None when it is not a regular file of the run."""
        path = self.best_kernel(row)
        data = run_files.read_bytes(self.run.dir, path, run_files.MAX_TEXT_BYTES) if path else None
        return hashlib.sha256(data).hexdigest() if data is not None else None

    def candidates_to_best(self, row):
        """(n, seconds): how many of the case's candidates were evaluated up to and including its
        winner, and the seconds from the run's start until the winner's profile item finished
        (journal.jsonl); (0, 0.0) when the baseline stayed best, None where unknown."""
        winner_id = (row.get("winner") or {}).get("id")
        if row.get("status") != "improved" or not winner_id:
            return 0, 0.0
        n = None
        for index, record in enumerate(self.records_of(row["case_name"]), start=1):
            if record.get("id") == winner_id:
                n = index
                break
        seconds = None
        folder = self.profile_dirs().get(winner_id)
        start = run_files.parse_time(self.run.run.get("started_at"))
        if folder and start is not None:
            for event in self.run.jsonl("journal.jsonl"):
                if event.get("dir") == folder and event.get("event") == "item_finished":
                    end = run_files.parse_time(event.get("ts"))
                    if end is not None:
                        seconds = max(0.0, (end - start).total_seconds())
        return n, seconds

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
        """Candidate id -> run-relative folder of its profile item in the loop (read once)."""
        if self._profile_dirs is None:
            self._profile_dirs = self._find_profile_dirs()
        return self._profile_dirs

    def _find_profile_dirs(self):
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
