"""The report page: a model (``Report`` of ``Section``s) and its HTML rendering.

The page is self-contained: inline CSS, charts as inline SVG, no script and no
external URL. Links point to files by relative paths.
"""
import dataclasses
import time

from . import markup

CSS = """
:root { --fg: #1d2330; --muted: #5c6475; --line: #d9dde5; --bg: #ffffff; --panel: #f5f7fa;
        --ok: #1b7f3b; --bad: #b3261e; --warn: #a05a00; --info: #2456a6; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; color: var(--fg); background: var(--bg); }
header { padding: 18px 28px 10px; border-bottom: 1px solid var(--line); background: var(--panel); }
header h1 { margin: 0 0 4px; font-size: 22px; }
header .meta { color: var(--muted); margin: 0; }
nav { padding: 8px 28px; border-bottom: 1px solid var(--line); font-size: 13px; }
nav a { margin-right: 14px; color: var(--info); text-decoration: none; }
main { padding: 8px 28px 40px; max-width: 1280px; }
section { margin-top: 22px; }
h2 { font-size: 18px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 16px 0 6px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 14px 0; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 10px 16px; min-width: 150px; }
.card .value { font-size: 22px; font-weight: bold; }
.card .label { color: var(--muted); font-size: 12px; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: var(--panel); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px; color: #fff; }
.badge.ok { background: var(--ok); } .badge.bad { background: var(--bad); }
.badge.warn { background: var(--warn); } .badge.info { background: var(--info); }
figure.chart { margin: 10px 0 16px; }
figure.chart svg { width: 100%; height: auto; max-width: 1000px; display: block; }
figure.chart figcaption { color: var(--muted); font-size: 12px; }
pre { background: var(--panel); border: 1px solid var(--line); padding: 8px; overflow-x: auto; font-size: 12px; line-height: 1.35; }
pre.diff span { display: inline-block; min-width: 100%; }
pre.diff .add { background: #e3f6e6; } pre.diff .del { background: #fbe5e3; }
pre.diff .hunk { color: var(--info); } pre.diff .head { color: var(--muted); }
details { margin: 6px 0; } summary { cursor: pointer; font-weight: bold; }
.note { color: var(--muted); }
.warning { color: var(--warn); }
footer { color: var(--muted); font-size: 12px; padding: 12px 28px; border-top: 1px solid var(--line); }
"""


@dataclasses.dataclass
class Section:
    """One part of the page: an anchor id, a heading and its body markup."""

    id: str
    title: str
    body: str


@dataclasses.dataclass
class Report:
    """What a run kind builds; ``render`` turns it into the page."""

    title: str
    kind: str
    subtitle: str = ""
    cards: list = dataclasses.field(default_factory=list)  # (label, value text)
    sections: list = dataclasses.field(default_factory=list)
    warnings: list = dataclasses.field(default_factory=list)
    regenerate: str = "accelopt-host report RUN_DIR"  # the command that writes this page again (the footer)


def card_markup(cards):
    """The key-figure cards."""
    items = [markup.tag("div", markup.tag("div", markup.esc(value), class_="value") +
                        markup.tag("div", markup.esc(label), class_="label"), class_="card")
             for label, value in cards]
    return markup.tag("div", "".join(items), class_="cards") if items else ""


def render(report, started=None):
    """The whole HTML document of ``report`` (``started``: time.perf_counter() at the start, for the footer)."""
    nav = "".join(markup.link(s.title, "#" + s.id) for s in report.sections)
    body = [markup.tag("header", markup.tag("h1", markup.esc(report.title)) +
                       markup.tag("p", report.subtitle, class_="meta")),
            markup.tag("nav", nav)]
    content = [card_markup(report.cards)]
    for warning in report.warnings:
        content.append(markup.tag("p", markup.esc(warning), class_="warning"))
    for section in report.sections:
        content.append(markup.tag("section", markup.tag("h2", markup.esc(section.title)) + section.body, id=section.id))
    body.append(markup.tag("main", "".join(content)))
    took = "" if started is None else f" in {time.perf_counter() - started:.2f} s"
    generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    body.append(markup.tag("footer", markup.esc(f"accelopt-host {'compare' if report.kind == 'compare' else 'report'} "
                                                f"({report.kind}), generated {generated}{took}. "
                                                f"Regenerate with: {report.regenerate}")))
    head = ('<meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"/>' +
            markup.tag("title", markup.esc(report.title)) + markup.tag("style", CSS))
    return "<!DOCTYPE html>\n" + markup.tag("html", markup.tag("head", head) + markup.tag("body", "".join(body)),
                                            lang="en") + "\n"
