"""A matplotlib figure as an SVG element to inline in the page.

matplotlib writes a standalone SVG document: an XML declaration, a DOCTYPE
with the W3C DTD URL, RDF metadata with namespace URLs, ``xlink:href`` links
and generic ids (``patch_1``). Inlined in HTML none of that is needed, so it
is removed: the element keeps no URL at all, ``href`` replaces ``xlink:href``,
and every id gets a per-chart prefix so that several charts on one page never
share one (their clip paths and markers are referenced by id).
"""
import io
import re

_ID = re.compile(r'\bid="([^"]+)"')


def figure_svg(figure, chart_id, label):
    """``figure`` rendered to an inline ``<svg>`` string with ids prefixed by ``chart_id``.

    ``label`` becomes the element's accessible name (``aria-label``).
    """
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return inline(buffer.getvalue(), chart_id, label)


def inline(document, chart_id, label):
    """An SVG document as an inline element (see the module docstring)."""
    start = document.find("<svg")
    if start < 0:
        raise ValueError("not an SVG document")
    svg = document[start:]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    svg = svg.replace("xlink:href=", "href=")
    ids = set(_ID.findall(svg))
    prefix = f"{chart_id}-"
    svg = _ID.sub(lambda m: f'id="{prefix}{m.group(1)}"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})" if m.group(1) in ids else m.group(0), svg)
    svg = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"' if m.group(1) in ids else m.group(0), svg)
    # The viewBox keeps the aspect ratio; CSS sets the width.
    root_end = svg.find(">")
    root = svg[:root_end]
    root = re.sub(r'\s(width|height)="[^"]*"', "", root)
    label = label.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    root += f' role="img" aria-label="{label}" class="chart-svg"'
    return root + svg[root_end:].rstrip() + "\n"
