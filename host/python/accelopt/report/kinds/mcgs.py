"""Run kind ``optimize-mcgs``: the Monte-Carlo graph search (pipelines/nkibench-mcgs.yaml, docs/search.md).

Recognised by ``search_graph.json``. It writes the beam search's files too (records,
optimize_results.json, best/), so the page is the beam page with its own kind and label,
the best kernels of its own records, and a section on the graph.
"""
import collections

from .. import markup
from ..page import Section
from . import beam

KIND = "optimize-mcgs"
LABEL = "graph search (MCGS)"


def matches(run):
    """True for a graph-search run (its search state is there)."""
    return run.exists("search_graph.json")


def summarize(run):
    """The index entry (as the beam's: per case baseline, best, speedup, candidates to the best)."""
    return beam.summarize_search(run, KIND)


def build(run, base_dir):
    """The report of a graph-search run."""
    return beam.build_search(run, base_dir, KIND, LABEL, extra=(graph_section,))


def graph_section(data, base_dir):
    """Per case: the graph's nodes by status, evaluations, transpositions, refused moves, the incumbent
    and why the case stopped (search_graph.json, events.jsonl)."""
    graph = data.run.json("search_graph.json", {})
    cases = graph.get("cases") if isinstance(graph.get("cases"), dict) else {}
    events = collections.Counter()
    for event in data.run.jsonl("events.jsonl"):
        events[(event.get("case"), event.get("type"))] += 1
    rows = []
    for name, case in cases.items():
        nodes = case.get("nodes") if isinstance(case.get("nodes"), dict) else {}
        statuses = collections.Counter(n.get("status", "?") for n in nodes.values() if isinstance(n, dict))
        incumbent = nodes.get(case.get("incumbent")) or {}
        rows.append((markup.esc(name), markup.esc(len(nodes)),
                     markup.esc(", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))),
                     markup.esc(case.get("evaluations", 0)), markup.esc(events[(name, "transposition")]),
                     markup.esc(events[(name, "invalid")]),
                     markup.esc(incumbent.get("candidate") or case.get("incumbent") or "-"),
                     markup.esc(case.get("stop_reason") or case.get("done_reason")  # stop_reason: a spend cap's
                                or ("running" if not case.get("done") else "-"))))
    if not rows:
        return Section("graph", "Search graph", markup.tag("p", "No search graph was written.", class_="note"))
    body = markup.table(["case", "nodes", "by status", "evaluations", "transpositions", "refused moves", "incumbent",
                         "stopped"], rows, numeric=(1, 3, 4, 5))
    files = [f for f in ("search_graph.json", "events.jsonl", "trace.md", "tactics.json") if data.run.exists(f)]
    if files:
        body += markup.tag("p", "Files: " + ", ".join(markup.link(f, markup.rel_href(data.run.path(f), base_dir))
                                                      for f in files))
    return Section("graph", "Search graph", body)
