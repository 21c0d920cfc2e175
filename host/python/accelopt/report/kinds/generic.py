"""Run kind ``generic``: any run directory no other kind claims (its run.json and stages only)."""
from .. import common
from .. import markup
from ..page import Report

KIND = "generic"
LABEL = "pipeline run"


def matches(run):
    """Always true: the fallback, listed last."""
    return True


def summarize(run):
    """The index entry: no problems and no speedup."""
    return {"kind": KIND, "geomean_speedup": None, "problems": []}


def build(run, base_dir):
    """A report with the run's facts and stage timings."""
    report = Report(title=f"{run.name()} — {run.id}", kind=KIND, subtitle=common.subtitle(run, LABEL))
    report.cards = [("status", run.status()), ("duration", markup.fmt_duration(run.duration_s()))]
    report.sections = common.safe_sections(report, [lambda: common.run_section(run, base_dir)])
    return report
