"""accelopt.report.svg and charts: matplotlib's SVG becomes an inline element without URLs or shared ids."""
import xml.etree.ElementTree as ElementTree

from accelopt.report import charts
from accelopt.report import svg

DOCUMENT = """<?xml version="1.0" encoding="utf-8" standalone="no"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN"
  "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<svg xmlns:xlink="http://www.w3.org/1999/xlink" width="432pt" height="216pt" viewBox="0 0 432 216" xmlns="http://www.w3.org/2000/svg" version="1.1">
 <metadata>
  <rdf:RDF xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Matplotlib, https://matplotlib.org/</dc:title></rdf:RDF>
 </metadata>
 <defs><clipPath id="p1"><rect x="0" y="0" width="1" height="1"/></clipPath><path id="m1" d="M 0 0"/></defs>
 <g id="patch_1" clip-path="url(#p1)"><use xlink:href="#m1" x="1" y="2"/></g>
 <a href="#elsewhere"/>
</svg>
"""


def test_inline_drops_urls_and_prefixes_ids():
    out = svg.inline(DOCUMENT, "c7", 'a "label" & <more>')
    assert "http" not in out and "<metadata" not in out and "DOCTYPE" not in out and "xmlns" not in out
    root = ElementTree.fromstring(out)
    assert root.get("viewBox") == "0 0 432 216" and root.get("width") is None and root.get("height") is None
    assert root.get("aria-label") == 'a "label" & <more>' and root.get("role") == "img"
    ids = {e.get("id") for e in root.iter() if e.get("id")}
    assert ids == {"c7-p1", "c7-m1", "c7-patch_1"}
    assert 'clip-path="url(#c7-p1)"' in out and 'href="#c7-m1"' in out
    assert 'href="#elsewhere"' in out  # not one of the chart's own ids: left alone


def test_charts_render_and_two_charts_share_no_id():
    a = charts.bars(["x", "y"], [1.0, None], "t", "x", "caption a", reference=1.0)
    b = charts.step_lines([("p", [0, 1, 2], [1.0, 1.0, 1.2]), ("q", [0, 1], [1.0, 1.1])], "t", "n", "s", "caption b")
    c = charts.stacked_bars(["x"], [("one", [1.0], "#000"), ("zero", [0.0], "#fff")], "t", "x", "caption c",
                            markers=[0.5], marker_label="latency")
    d = charts.grouped_bars(["x", "y"], [("A", [1.0, 2.0], "#111"), ("B", [None, 1.5], "#222")], "t", "x", "caption d")
    ids = []
    for chart in (a, b, c, d):
        root = ElementTree.fromstring(chart)
        assert root.tag == "figure" and root.find("svg") is not None and root.find("figcaption") is not None
        ids += [e.get("id") for e in root.iter() if e.get("id")]
    assert len(ids) == len(set(ids))


def test_a_chart_that_cannot_be_drawn_becomes_a_note():
    out = charts.bars(["x"], [1.5], "t", "x", "a float shown as an integer", value_format="{:d}")
    assert out.startswith('<p class="warning">chart failed: ')
