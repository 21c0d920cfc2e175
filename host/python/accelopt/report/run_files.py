"""Read-only access to one run directory for the report.

Every reader is forgiving: a missing, unreadable or half-written file gives
the caller's default, never an exception, so a report of a failed or
interrupted run still shows what is there.

A run directory may come from elsewhere, and its JSON names file paths. So
every read goes through ``read_bytes``: only a regular file inside the run,
reached without following any link below the run directory (openat with
O_NOFOLLOW one component at a time), opened with O_NONBLOCK (a FIFO or
device never blocks the report) and at most a size cap. Anything else reads
as missing. The run directory itself may be reached through a link
(``runs/latest``).
"""
import datetime
import glob
import json
import os
import re
import stat

MAX_TEXT_BYTES = 4 << 20
"""Largest text file (a kernel's source) the report reads."""
MAX_JSON_BYTES = 128 << 20
"""Largest JSON or JSON-lines file (run.json, records.jsonl, outputs.json) the report reads."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


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

    def inside(self, path):
        """``path`` (relative to the run, or absolute) as a run-relative path, or None when it is outside."""
        return relative_inside(self.dir, path)

    def exists(self, relative):
        """True when ``relative`` (or an absolute path inside the run) names a regular file of the run,
        reached without following a link."""
        fd = open_inside(self.dir, relative)
        if fd is None:
            return False
        os.close(fd)
        return True

    def json(self, relative, default=None):
        """The parsed JSON file ``relative`` (cached), or ``default``."""
        key = ("json", relative)
        if key not in self._cache:
            self._cache[key] = self.load_json(relative)
        value = self._cache[key]
        return default if value is None else value

    def load_json(self, relative):
        """The parsed JSON file ``relative`` (not cached), or None when it is missing, invalid or not readable."""
        data = read_bytes(self.dir, relative, MAX_JSON_BYTES)
        if data is None:
            return None
        try:
            return json.loads(data.decode("utf-8"))
        except ValueError:
            return None

    def jsonl(self, relative):
        """The objects of the JSON-lines file ``relative`` (bad lines skipped; cached)."""
        key = ("jsonl", relative)
        if key not in self._cache:
            self._cache[key] = parse_jsonl(read_bytes(self.dir, relative, MAX_JSON_BYTES) or b"")
        return self._cache[key]

    def text(self, relative, default=""):
        """The text of ``relative`` (or of an absolute path inside the run; undecodable bytes replaced),
        or ``default``."""
        data = read_bytes(self.dir, relative, MAX_TEXT_BYTES)
        return default if data is None else data.decode("utf-8", errors="replace")

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


def relative_inside(run_dir, path):
    """``path`` (relative to ``run_dir``, or absolute) as a normalised path relative to the run, or None
    when it leaves the run (an absolute path elsewhere, ``..``, a NUL byte). Lexical only: links are
    refused when the file is opened (``open_inside``)."""
    if not isinstance(path, str) or not path or "\0" in path:
        return None
    if os.path.isabs(path):
        path = os.path.normpath(path)
        for base in (os.path.abspath(run_dir), os.path.realpath(run_dir)):
            relative = os.path.relpath(path, base)
            if relative != os.curdir and not relative.startswith(os.pardir):
                return relative
        return None
    relative = os.path.normpath(path)
    parts = relative.split(os.sep)
    if relative == os.curdir or os.pardir in parts:
        return None
    return relative


def open_inside(run_dir, path):
    """A read-only descriptor of the regular file ``path`` inside ``run_dir``, or None.

    Walks from the run directory one component at a time with O_NOFOLLOW, so a link anywhere below
    the run (file or folder) is refused; O_NONBLOCK keeps a FIFO from blocking; fstat must say
    regular file. The caller closes the descriptor."""
    relative = relative_inside(run_dir, path)
    if relative is None:
        return None
    parts = relative.split(os.sep)
    fds = []
    try:
        fds.append(os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        for part in parts[:-1]:
            fds.append(os.open(part, _DIR_FLAGS, dir_fd=fds[-1]))
        fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fds[-1])
    except OSError:
        return None
    finally:
        for opened in fds:
            os.close(opened)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def read_bytes(run_dir, path, limit):
    """The bytes of the regular file ``path`` inside ``run_dir`` (``open_inside``), or None when it is
    not such a file or holds more than ``limit`` bytes."""
    fd = open_inside(run_dir, path)
    if fd is None:
        return None
    try:
        if os.fstat(fd).st_size > limit:
            return None
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return None if size > limit else b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def parse_jsonl(data):
    """The JSON objects of the lines of ``data`` (bytes; invalid lines skipped)."""
    out = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


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
