"""Parts every report shares: the header line and the "Run" section (run.json and stage timings)."""
import os

from . import markup
from .page import Section

STATUS_BADGE = {"succeeded": "ok", "failed": "bad", "crashed": "bad", "interrupted": "warn", "running": "info"}


def status_badge(status):
    """The run status as a coloured badge."""
    return markup.badge(status, STATUS_BADGE.get(status, "info"))


def subtitle(run, kind_label):
    """The header's meta line: status, kind, start time, duration and backend."""
    backend = (run.run.get("backend") or {}).get("backend") or "?"
    parts = [status_badge(run.status()), markup.esc(kind_label), markup.esc(run.run.get("started_at") or "start unknown"),
             markup.esc("duration " + markup.fmt_duration(run.duration_s())), markup.esc("backend " + backend)]
    return " · ".join(parts)


def stage_rows(run):
    """One row per top-level stage: (id, status, seconds, items or iterations, folder)."""
    rows = []
    for folder in run.glob("stages/*"):
        if not os.path.isdir(run.path(folder)):
            continue
        name = os.path.basename(folder)
        stage_id = name.split("-", 1)[1] if "-" in name else name
        status = run.json(folder + "/status.json", {})
        seconds = status.get("seconds")
        detail = str(status["items"]) + " items" if "items" in status else ""
        if not status and run.glob(folder + "/iter-*"):
            iterations = run.glob(folder + "/iter-*")
            seconds = sum(run.json(s, {}).get("seconds") or 0 for s in run.glob(folder + "/iter-*/*/status.json"))
            detail = f"{len(iterations)} iterations"
            status = {"status": (run.run.get("stages") or {}).get(stage_id, {}).get("status", "?")}
        rows.append((stage_id, status.get("status", "?"), seconds, detail, folder))
    return rows


def run_section(run, base_dir):
    """The "Run" section: what ran, where, how long each stage took, and the run's files."""
    info = run.run
    backend = info.get("backend") or {}
    facts = [("run", markup.esc(run.id)), ("pipeline", markup.esc(info.get("pipeline", "?"))),
             ("status", status_badge(run.status())), ("started", markup.esc(info.get("started_at", "-"))),
             ("finished", markup.esc(info.get("finished_at", "-"))),
             ("duration", markup.esc(markup.fmt_duration(run.duration_s()))),
             ("backend", markup.esc(f"{backend.get('backend', '?')} ({backend.get('reason', '')})")),
             ("--set", markup.esc(" ".join(info.get("sets") or []) or "-")),
             ("versions", markup.esc(", ".join(f"{k} {v}" for k, v in sorted((info.get("versions") or {}).items())
                                               if k != "python_executable")))]
    if info.get("error"):
        facts.append(("error", markup.esc(str(info.get("error")))))
    body = markup.table(["", ""], [(markup.esc(k), v) for k, v in facts])
    rows = []
    for stage_id, status, seconds, detail, folder in stage_rows(run):
        badge = markup.badge(status, "ok" if status == "ok" else ("bad" if status == "failed" else "warn"))
        rows.append((markup.link(stage_id, markup.rel_href(run.path(folder), base_dir)), badge,
                     markup.esc(markup.fmt_duration(seconds) if seconds is not None else "-"), markup.esc(detail)))
    if rows:
        body += markup.tag("h3", "Stages") + markup.table(["stage", "status", "time", "detail"], rows, numeric=(2,))
    files = [f for f in ("run.json", "journal.jsonl", "pipeline.resolved.yaml", "llm/transcript.jsonl") if run.exists(f)]
    if files:
        body += markup.tag("p", "Files: " + ", ".join(markup.link(f, markup.rel_href(run.path(f), base_dir)) for f in files))
    return Section("run", "Run", body)


def safe_sections(report, builders):
    """Calls each section builder in order; a builder that raises becomes a warning on the page.

    Returns the sections built (None results dropped). One broken section never costs the page.
    """
    sections = []
    for builder in builders:
        try:
            section = builder()
        except Exception as error:  # noqa: BLE001 - see the docstring
            report.warnings.append(f"a section could not be built: {type(error).__name__}: {error}")
            continue
        if section is not None:
            sections.append(section)
    return sections
