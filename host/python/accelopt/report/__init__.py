"""The HTML report of a run, its index summary and run-to-run comparison (docs/reports.md).

Called by the host (``accelopt-host report``, the end of every ``run``, ``runs``
and ``compare``) through the embedded interpreter, with JSON requests:

* ``render_report({"run_dir", "out"?})`` -> ``{"html", "kind", "charts", "seconds", "warnings"}``;
* ``write_report({"run_dir", "out"?})`` -> the same without ``html``, plus ``path`` (written atomically);
* ``summarize_run({"run_dir"})`` -> the run's index entry (``kinds`` docstring);
* ``compare_runs({"a", "b", "out"?})`` -> per-case best latencies of two runs (``compare``).

The kind of a run (profile, optimize-beam, ...) is recognised from its files
(``accelopt.report.kinds``).
"""
import os
import tempfile
import time

from . import compare
from . import kinds
from . import page
from .run_files import RunFiles


def _out_path(request, run):
    out = request.get("out") or os.path.join(run.dir, "report.html")
    return os.path.abspath(out)


def render_report(request):
    """Builds the page of ``request["run_dir"]``; links are relative to the folder of ``request["out"]``
    (default ``<run_dir>/report.html``). Raises FileNotFoundError when the run directory does not exist."""
    started = time.perf_counter()
    run = RunFiles(request["run_dir"])
    if not os.path.isdir(run.dir):
        raise FileNotFoundError(f"no run directory {run.dir}")
    out = _out_path(request, run)
    kind = kinds.detect(run)
    report = kind.build(run, os.path.dirname(out))
    html = page.render(report, started)
    return {"html": html, "kind": kind.KIND, "out": out, "charts": html.count("<svg"),
            "seconds": time.perf_counter() - started, "warnings": list(report.warnings)}


def write_report(request):
    """Renders the report and writes it to ``out`` (default ``<run_dir>/report.html``) through a temporary
    file renamed over it. Returns render_report's result with ``path`` instead of ``html``."""
    result = render_report(request)
    html = result.pop("html")
    out = result.pop("out")
    write_atomic(out, html)
    result["path"] = out
    result["bytes"] = len(html.encode("utf-8"))
    return result


def write_atomic(path, text):
    """Writes ``text`` to ``path`` via a temporary file in the same folder and a rename."""
    folder = os.path.dirname(path) or "."
    fd, temporary = tempfile.mkstemp(prefix=".report-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def summarize_run(request):
    """The index entry of ``request["run_dir"]``: run.json facts plus the kind's summary
    (``{"id", "dir", "name", "pipeline", "status", "started_at", "finished_at", "duration_s",
    "kind", "geomean_speedup", "problems", "report"}``)."""
    run = RunFiles(request["run_dir"])
    kind = kinds.detect(run)
    summary = kind.summarize(run)
    info = run.run
    summary.update({"id": run.id, "dir": run.dir, "name": run.name(), "pipeline": info.get("pipeline", ""),
                    "status": run.status(), "started_at": info.get("started_at", ""),
                    "finished_at": info.get("finished_at", ""), "duration_s": run.duration_s(),
                    "report": run.path("report.html") if run.exists("report.html") else None})
    return summary


def compare_runs(request):
    """Per-case best latency of runs ``a`` and ``b`` (run directories); with ``out``, also writes the
    comparison page there. Returns ``{"a", "b", "rows", "geomean_ratio", "path"?}`` (compare.compare)."""
    a = summarize_run({"run_dir": request["a"]})
    b = summarize_run({"run_dir": request["b"]})
    result = compare.compare(a, b)
    if request.get("out"):
        out = os.path.abspath(request["out"])
        write_atomic(out, compare.page_html(a, b, result, os.path.dirname(out)))
        result["path"] = out
    return result
