"""Run kind ``agent``: the reflexion agent loop (pipelines/nkibench-agent.yaml, docs/search.md).

Recognised by ``experiments.jsonl`` or ``lessons.json``. It writes the beam search's files
too (records, optimize_results.json, best/), so the page is the beam page with its own kind
and label, the best kernels of its own records, and the agent's rounds.
"""
import collections

from .. import markup
from ..page import Section
from . import beam

KIND = "agent"
LABEL = "reflexion agent"


def matches(run):
    """True for an agent run (its attempt history or lessons are there)."""
    return run.exists("experiments.jsonl") or run.exists("lessons.json")


def summarize(run):
    """The index entry (as the beam's: per case baseline, best, speedup, candidates to the best)."""
    return beam.summarize_search(run, KIND)


def build(run, base_dir):
    """The report of an agent run."""
    return beam.build_search(run, base_dir, KIND, LABEL, extra=(rounds_section,))


def rounds_section(data, base_dir):
    """Per case the agent's rounds (experiments.jsonl): verdict, candidate, latency, speedup vs the best
    before the round, and the plan; with the count of each verdict."""
    by_case = collections.defaultdict(list)
    for experiment in data.run.jsonl("experiments.jsonl"):
        by_case[experiment.get("case_name")].append(experiment)
    if not by_case:
        return Section("rounds", "Agent rounds", markup.tag("p", "No round was recorded.", class_="note"))
    parts = []
    for name in data.case_names() + [n for n in by_case if n not in data.case_names()]:
        rounds = by_case.get(name)
        if not rounds:
            continue
        verdicts = collections.Counter(r.get("status", "?") for r in rounds)
        rows = [(markup.esc(r.get("round", "")), markup.badge(r.get("status", "?"), "ok" if r.get("status") == "improved"
                                                               else "bad" if "fail" in str(r.get("status")) else "warn"),
                 markup.esc(r.get("candidate", "")), markup.fmt(r.get("latency_ms")), markup.fmt_x(r.get("speedup_vs_best")),
                 markup.esc((r.get("plan_summary") or "")[:90])) for r in rounds]
        summary = f"{name}: {len(rounds)} round(s); " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))
        parts.append(markup.tag("details", markup.tag("summary", markup.esc(summary)) +
                                markup.table(["round", "verdict", "candidate", "latency ms", "vs best before", "plan"],
                                             rows, numeric=(0, 3, 4))))
    files = [f for f in ("experiments.jsonl", "lessons.json") if data.run.exists(f)]
    if files:
        parts.append(markup.tag("p", "Files: " + ", ".join(markup.link(f, markup.rel_href(data.run.path(f), base_dir))
                                                           for f in files)))
    return Section("rounds", "Agent rounds", "".join(parts))
