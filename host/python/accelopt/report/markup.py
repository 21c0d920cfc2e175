"""Small HTML builders for the report.

Everything they return is well-formed XML as well as HTML (closed tags,
quoted attributes, only the five XML entities), so a test can parse a whole
page with ``xml.etree``. Text is always escaped here; callers pass raw text.
"""
import html
import os
import urllib.parse


def esc(value):
    """``value`` as escaped HTML text (None gives an empty string)."""
    return "" if value is None else html.escape(str(value), quote=True)


def tag(name, content="", **attrs):
    """``<name attrs>content</name>``; ``content`` is trusted markup, attribute values are escaped.

    A trailing underscore in an attribute name is dropped (``class_``), and
    other underscores become dashes (``data_kind`` -> ``data-kind``).
    """
    parts = [name]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        key = key.rstrip("_").replace("_", "-")
        parts.append(f'{key}="{esc(value)}"')
    return f"<{' '.join(parts)}>{content}</{name}>"


def link(text, href):
    """An ``<a>`` to a run-relative ``href`` (already made relative by ``rel_href``)."""
    return tag("a", esc(text), href=href)


def rel_href(target, base_dir):
    """A relative, percent-encoded link from ``base_dir`` to the file ``target``."""
    target, base_dir = os.path.abspath(target), os.path.abspath(base_dir)
    if target.startswith(base_dir + os.sep):  # the common case, without relpath's cost
        relative = target[len(base_dir) + 1:]
    else:
        relative = os.path.relpath(target, base_dir)
    return "/".join(urllib.parse.quote(part) for part in relative.split(os.sep))


def table(headers, rows, numeric=(), class_=None, row_attrs=None):
    """A table; ``rows`` hold trusted cell markup; columns in ``numeric`` are right-aligned.
    ``row_attrs``: one dict of attributes per row (``data_case=...`` -> ``data-case``), escaped."""
    head = "".join(tag("th", esc(h), class_="num" if i in numeric else None) for i, h in enumerate(headers))
    body = []
    for index, row in enumerate(rows):
        cells = "".join(tag("td", cell, class_="num" if i in numeric else None) for i, cell in enumerate(row))
        attrs = row_attrs[index] if row_attrs and index < len(row_attrs) else {}
        body.append(tag("tr", cells, **attrs))
    thead = tag("thead", tag("tr", head)) if any(headers) else ""  # all-empty headers: a key/value table
    return tag("table", thead + tag("tbody", "".join(body)), class_=class_)


def badge(text, kind):
    """A coloured label (``kind``: ok, bad, warn, info)."""
    return tag("span", esc(text), class_=f"badge {kind}")


def fmt(value, digits=4, suffix=""):
    """A number with ``digits`` significant digits (``-`` for None)."""
    if value is None:
        return "-"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return esc(value)
    return esc(f"{number:.{digits}g}{suffix}")


def fmt_x(value):
    """A speedup as ``1.234x`` (``-`` for None)."""
    if not isinstance(value, (int, float)):
        return "-"
    return esc(f"{float(value):.3f}x")


def fmt_bytes(value):
    """A byte count in B/KiB/MiB/GiB."""
    if value is None:
        return "-"
    number = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(number) < 1024 or unit == "GiB":
            return esc(f"{number:.3g} {unit}")
        number /= 1024
    return esc(f"{number:.3g} GiB")


def fmt_duration(seconds):
    """``1h02m03s`` / ``2m03s`` / ``4.2s`` (``-`` for None)."""
    if seconds is None:
        return "-"
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
