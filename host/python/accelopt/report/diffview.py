"""A unified diff of two kernel sources as coloured HTML."""
import difflib

from . import markup


def unified_diff(before, after, before_name, after_name, context=3):
    """The unified diff lines (no trailing newlines) from ``before`` to ``after``."""
    return list(difflib.unified_diff(before.splitlines(), after.splitlines(), before_name, after_name,
                                     n=context, lineterm=""))


def diff_markup(before, after, before_name, after_name):
    """``<pre class="diff">`` with one span per line, classed add/del/hunk/head; a note when equal."""
    lines = unified_diff(before, after, before_name, after_name)
    if not lines:
        return markup.tag("p", "The two kernels are identical.", class_="note")
    spans = []
    for line in lines:
        if line.startswith(("---", "+++")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = None
        text = markup.esc(line) if line else " "
        spans.append((markup.tag("span", text, class_=kind) if kind else text) + "\n")
    return markup.tag("pre", "".join(spans), class_="diff")


def diff_stats(before, after):
    """(lines added, lines removed) between two sources."""
    added = removed = 0
    for line in unified_diff(before, after, "a", "b", context=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed
