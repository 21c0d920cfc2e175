"""Read-only access to one run directory for the report.

Every reader is forgiving: a missing, unreadable or half-written file gives
the caller's default, never an exception, so a report of a failed or
interrupted run still shows what is there.
"""
import datetime
import glob
import json
import os
import re


class RunFiles:
    """One run directory (``runs/<id>/``): its files, parsed on demand and cached."""

    def __init__(self, run_dir):
        """``run_dir``: the run's folder (absolute or relative)."""
        self.dir = os.path.abspath(run_dir)
        self.id = os.path.basename(self.dir.rstrip(os.sep))
        self._cache = {}

    def path(self, relative):
        """The absolute path of ``relative`` inside the run directory."""
        return os.path.join(self.dir, relative)

    def exists(self, relative):
        """True when ``relative`` names a regular file of the run."""
        return os.path.isfile(self.path(relative))

    def json(self, relative, default=None):
        """The parsed JSON file ``relative`` (cached), or ``default``."""
        key = ("json", relative)
        if key not in self._cache:
            self._cache[key] = load_json(self.path(relative))
        value = self._cache[key]
        return default if value is None else value

    def jsonl(self, relative):
        """The objects of the JSON-lines file ``relative`` (bad lines skipped; cached)."""
        key = ("jsonl", relative)
        if key not in self._cache:
            self._cache[key] = load_jsonl(self.path(relative))
        return self._cache[key]

    def text(self, relative, default=""):
        """The text of ``relative``, or ``default``."""
        return read_text(self.path(relative), default)

    def glob(self, pattern):
        """Run-relative paths matching ``pattern`` (sorted naturally: iter-2 before iter-10)."""
        found = glob.glob(os.path.join(self.dir, pattern))
        return sorted((os.path.relpath(p, self.dir) for p in found), key=natural_key)

    @property
    def run(self):
        """run.json as a dict (empty when missing)."""
        return self.json("run.json", {})

    def name(self):
        """The pipeline's name (run.json ``name``), else the directory name."""
        return self.run.get("name") or self.id

    def status(self):
        """The run's final status from run.json (``unknown`` when missing)."""
        return self.run.get("status") or "unknown"

    def duration_s(self):
        """Seconds from ``started_at`` to ``finished_at``, or None."""
        start = parse_time(self.run.get("started_at"))
        end = parse_time(self.run.get("finished_at"))
        if start is None or end is None:
            return None
        return max(0.0, (end - start).total_seconds())

    def llm_usage(self):
        """run.json ``services.llm.usage`` ({total, by_stage, by_model, ...}) or {}."""
        services = self.run.get("services") or {}
        llm = services.get("llm") or {}
        return llm.get("usage") or {}


def load_json(path):
    """Parses the JSON file at ``path``; None when it is missing or invalid."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def load_jsonl(path):
    """The JSON objects of the lines of ``path`` (invalid lines skipped); [] when missing."""
    out = []
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    value = json.loads(line)
                except ValueError:
                    continue
                if isinstance(value, dict):
                    out.append(value)
    except OSError:
        pass
    return out


def read_text(path, default=""):
    """The UTF-8 text of ``path`` (undecodable bytes replaced), or ``default``."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return default


def parse_time(text):
    """A ``2026-11-25T17:40:23Z`` timestamp as an aware datetime, or None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return None


def natural_key(text):
    """Sort key that orders the numbers inside ``text`` numerically."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]
