"""Kernel edits as unified diffs: make one (difflib), apply one strictly, and
turn an executor's reply parts into the new kernel source.

Why a small applier of our own: Python's standard library writes unified
diffs (difflib) but does not apply them, no patch library is installed with
the project, and GNU ``patch`` / ``git apply`` reject what language models
usually write (hunks without ``---``/``+++`` headers, wrong line counts in
``@@`` headers, blank context lines without their leading space). The applier
below accepts those forms and is strict where it matters: every context and
removed line of a hunk must match the source exactly (trailing whitespace
aside), or the hunk is refused with an error naming it. docs/search.md,
"LLM moves", describes the protocol.

apply(source, diff)        -> new source; raises PatchError
make_diff(old, new)        -> unified diff text (a/kernel.py, b/kernel.py)
resolve(request)           -> the JSON contract native:execute calls
"""
import difflib
import re

from .search import canon

_HUNK = re.compile(r"^@@+ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@+")
_BARE_HUNK = re.compile(r"^@@+(?:\s.*)?$")

# What a Lua stage may call through accel.python_call (accelopt/lua_calls.py): pure text functions.
LUA_CALLABLE = ("make_diff", "looks_like_diff", "apply")


class PatchError(ValueError):
    """A diff that cannot be applied; ``kind`` is "bad_diff" or "hunk_failed"."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def make_diff(old, new, name="kernel.py"):
    """Unified diff (3 lines of context) from source ``old`` to ``new`` (str); "" when equal."""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{name}", tofile=f"b/{name}"))


def looks_like_diff(text):
    """True when ``text`` has a hunk header line (``@@ ... @@`` or a bare ``@@``)."""
    return any(_HUNK.match(line) or _BARE_HUNK.match(line) for line in text.splitlines())


def parse_hunks(diff):
    """The hunks of a single-file unified diff, in order.

    Returns [{"number": 1-based, "header": the @@ line, "old_start": int or None,
    "lines": [(tag, text)]}] with tag " ", "-" or "+". ``---``/``+++``/``diff``/
    ``index`` lines are skipped; an empty line inside a hunk is an empty context
    line; "\\ No newline at end of file" is ignored. Line counts in the header
    are not trusted (models miscount): a hunk ends at the next header or at a
    line that is not part of a hunk.
    Raises PatchError("bad_diff") when there is no hunk or a hunk changes nothing.
    """
    hunks = []
    current = None
    for raw in diff.splitlines():
        line = raw.rstrip("\r")
        m = _HUNK.match(line)
        if m or _BARE_HUNK.match(line):
            current = {"number": len(hunks) + 1, "header": line.strip(),
                       "old_start": int(m.group(1)) if m else None, "lines": []}
            hunks.append(current)
            continue
        if current is None:
            continue  # file headers, prose before the first hunk
        if line.startswith(("--- ", "+++ ")) and current["lines"] and _next_is_header(line):
            current = None
            continue
        if line.startswith("\\"):
            continue
        if line == "":
            current["lines"].append((" ", ""))
        elif line[0] in " -+":
            current["lines"].append((line[0], line[1:]))
        else:
            current = None  # prose after the diff
    if not hunks:
        raise PatchError("bad_diff", "the diff has no hunk (no line starting with @@)")
    for h in hunks:
        while h["lines"] and h["lines"][-1] == (" ", ""):
            h["lines"].pop()  # blank lines after the hunk body
        if not any(tag in "-+" for tag, _ in h["lines"]):
            raise PatchError("bad_diff", f"hunk {h['number']} ({h['header']}) neither removes nor adds a line")
    return hunks


def _next_is_header(line):
    return line.startswith(("--- a/", "+++ b/", "--- ", "+++ "))


def _find(lines, old, hint, start):
    """Index >= start where ``old`` (list of str) occurs in ``lines``, nearest to ``hint``; None if nowhere."""
    key = [s.rstrip() for s in old]
    n = len(key)
    hits = [i for i in range(start, len(lines) - n + 1) if [s.rstrip() for s in lines[i:i + n]] == key]
    if not hits:
        return None
    return min(hits, key=lambda i: (abs(i - hint), i))


def apply(source, diff):
    """``source`` (str) with the unified ``diff`` applied; raises PatchError.

    Each hunk's old side (context and removed lines) must occur in the source
    exactly, compared line by line without trailing whitespace, at or after the
    end of the previous hunk; among several occurrences the one nearest to the
    header's old start line wins (line numbers are a hint, not a requirement).
    A hunk with no old side (pure addition) goes at its header's line. The
    error of a hunk that does not match names it ("hunk 2 (@@ -10,4 +10,5 @@)")
    and shows its first old line.
    """
    hunks = parse_hunks(diff)
    lines = source.splitlines()
    out = []
    pos = 0
    for h in hunks:
        old = [text for tag, text in h["lines"] if tag in " -"]
        new = [text for tag, text in h["lines"] if tag in " +"]
        hint = (h["old_start"] - 1) if h["old_start"] else pos
        if not old:
            at = max(pos, min(len(lines), hint + 1 if h["old_start"] else hint))
        else:
            at = _find(lines, old, hint, pos)
            if at is None:
                first = old[0] if old[0].strip() else next((s for s in old if s.strip()), old[0])
                where = "after the previous hunk" if pos else "in the kernel"
                raise PatchError("hunk_failed", f"hunk {h['number']} ({h['header']}) does not apply: its {len(old)} "
                                                f"context/removed line(s) starting with {first.strip()!r} do not "
                                                f"occur {where}")
        out.extend(lines[pos:at])
        out.extend(new)
        pos = at + len(old)
    out.extend(lines[pos:])
    text = "\n".join(out)
    return text + "\n" if source.endswith("\n") or not source else text


def resolve(request):
    """The new kernel of an executor reply (the JSON contract of native:execute).

    ``request``: {"parent": parent source (str), "diff": the reply's diff or null,
    "source": the reply's full kernel module or null}. The diff is tried first;
    when there is none or it does not apply, the full source is the fallback.
    Returns {"source": str, "diff": make_diff(parent, source), "edit": "diff" |
    "source", "state_hash": the graph search's state key of the source (accelopt.search.canon)[,
    "patch_error": {"kind", "message"}] (why the diff was not used)}
    or {"error": {"kind", "message"}}: kind "patch_failed" (the diff did not
    apply and there is no full source), "no_code" (neither given) or
    "bad_request". Never raises.
    """
    if not isinstance(request, dict) or not isinstance(request.get("parent"), str):
        return {"error": {"kind": "bad_request", "message": "request must be an object with a `parent` source string"}}
    parent = request["parent"]
    diff = request.get("diff")
    full = request.get("source")
    patch_error = None
    if isinstance(diff, str) and diff.strip():
        try:
            new = apply(parent, diff)
            return {"source": new, "diff": make_diff(parent, new), "edit": "diff", "state_hash": canon.state_hash(new)}
        except PatchError as exc:
            patch_error = {"kind": exc.kind, "message": str(exc)}
    if isinstance(full, str) and full.strip():
        out = {"source": full, "diff": make_diff(parent, full), "edit": "source", "state_hash": canon.state_hash(full)}
        if patch_error:
            out["patch_error"] = patch_error
        return out
    if patch_error:
        return {"error": {"kind": "patch_failed", "message": patch_error["message"] +
                          "; the reply has no full kernel to fall back on"}}
    return {"error": {"kind": "no_code", "message": "the reply has neither a diff nor a kernel code block"}}
