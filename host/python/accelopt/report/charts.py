"""The report's charts, drawn with matplotlib and returned as inline SVG markup.

Each function takes plain data and returns a ``<figure class="chart">``
element. matplotlib is imported lazily: where it is missing (Debian package
``python3-matplotlib``), a chart becomes a one-line note and the page is
still written. Figures are built with ``matplotlib.figure.Figure`` (no
pyplot state), so charts can be drawn from any thread holding the GIL.
"""
import itertools
import math
import warnings

from . import markup
from . import svg

ENGINE_COLORS = {"tensor": "#4e79a7", "vector": "#f28e2b", "scalar": "#59a14f", "gpsimd": "#b07aa1", "dma": "#9c755f"}
BEFORE, AFTER = "#a0a7b4", "#2f6fbd"
OK_COLOR = "#59a14f"
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#1f77b4", "#8c564b", "#17becf", "#bcbd22", "#7f7f7f", "#d62728"]
_counter = itertools.count(1)


def matplotlib_missing():
    """None when matplotlib imports, else the reason (shown instead of the charts)."""
    try:
        import matplotlib  # noqa: F401  (only probing)
    except ImportError as error:
        return f"charts unavailable: matplotlib cannot be imported ({error}); install the Debian package python3-matplotlib"
    return None


def _figure(width, height):
    """A Figure with the report's style (no pyplot)."""
    import matplotlib
    from matplotlib.figure import Figure
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "accelopt-report", "font.size": 9,
                                "font.family": "DejaVu Sans", "axes.spines.top": False, "axes.spines.right": False,
                                "axes.titlesize": 10, "axes.titleweight": "bold", "legend.fontsize": 8,
                                "legend.frameon": False})
    return Figure(figsize=(width, height), layout="constrained")


def _wrap(figure, caption):
    """The figure element: inline SVG plus its caption."""
    chart_id = f"c{next(_counter)}"
    body = svg.figure_svg(figure, chart_id, caption)
    return markup.tag("figure", body + markup.tag("figcaption", markup.esc(caption)), class_="chart")


def _guard(draw):
    """Runs ``draw()``; a missing matplotlib or a drawing error becomes a note instead of a chart."""
    missing = matplotlib_missing()
    if missing:
        return markup.tag("p", markup.esc(missing), class_="note")
    try:
        with warnings.catch_warnings():  # layout hints from matplotlib are not the run's warnings
            warnings.simplefilter("ignore")
            return draw()
    except Exception as error:  # noqa: BLE001 - one bad chart must not cost the page
        return markup.tag("p", markup.esc(f"chart failed: {type(error).__name__}: {error}"), class_="warning")


def _height(rows, per_row=0.32, extra=1.1):
    return max(1.8, min(16.0, extra + per_row * rows))


def bars(labels, values, title, xlabel, caption, reference=None, value_format="{:.3g}", colors=None):
    """Horizontal bars, one per label, with the value printed at the end; ``reference`` draws a dashed line."""
    def draw():
        figure = _figure(8.5, _height(len(labels)))
        axes = figure.subplots()
        y = list(range(len(labels)))
        shown = [0 if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values]
        axes.barh(y, shown, color=colors or AFTER, height=0.65)
        for i, v in enumerate(values):
            if v is not None:
                axes.text(shown[i], i, " " + value_format.format(v), va="center", fontsize=8)
        if reference is not None:
            axes.axvline(reference, color="#333", linestyle="--", linewidth=0.8)
        axes.set_yticks(y, labels)
        axes.invert_yaxis()
        axes.set_xlabel(xlabel)
        axes.set_title(title)
        axes.margins(x=0.12)
        return _wrap(figure, caption)
    return _guard(draw)


def grouped_bars(labels, series, title, xlabel, caption, value_format="{:.3g}"):
    """Horizontal grouped bars: ``series`` is [(name, values, color)], one bar of each per label."""
    def draw():
        figure = _figure(8.5, _height(len(labels), per_row=0.25 + 0.2 * len(series)))
        axes = figure.subplots()
        n = len(series)
        width = 0.8 / n
        for k, (name, values, color) in enumerate(series):
            ys = [i - 0.4 + width * (k + 0.5) for i in range(len(labels))]
            shown = [0 if v is None else v for v in values]
            axes.barh(ys, shown, height=width * 0.92, color=color, label=name)
            for y, v in zip(ys, values):
                if v is not None:
                    axes.text(v, y, " " + value_format.format(v), va="center", fontsize=7)
        axes.set_yticks(range(len(labels)), labels)
        axes.invert_yaxis()
        axes.set_xlabel(xlabel)
        axes.set_title(title)
        axes.margins(x=0.14)
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return _wrap(figure, caption)
    return _guard(draw)


def stacked_bars(labels, segments, title, xlabel, caption, markers=None, marker_label=None):
    """Horizontal stacked bars: ``segments`` is [(name, values, color)] stacked left to right.

    ``markers`` (one value per label or None) draws a black tick on each bar,
    e.g. the kernel's latency over its engines' busy times.
    """
    def draw():
        figure = _figure(8.5, _height(len(labels)))
        axes = figure.subplots()
        y = list(range(len(labels)))
        left = [0.0] * len(labels)
        for name, values, color in segments:
            shown = [0 if v is None else v for v in values]
            if not any(shown):
                continue
            axes.barh(y, shown, left=left, color=color, label=name, height=0.65)
            left = [a + b for a, b in zip(left, shown)]
        if markers:
            points = [(m, i) for i, m in enumerate(markers) if m is not None]
            if points:
                axes.scatter([p[0] for p in points], [p[1] for p in points], marker="|", s=260, color="black",
                             linewidths=2, label=marker_label, zorder=3)
        axes.set_yticks(y, labels)
        axes.invert_yaxis()
        axes.set_xlabel(xlabel)
        axes.set_title(title)
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return _wrap(figure, caption)
    return _guard(draw)


def step_lines(series, title, xlabel, ylabel, caption, reference=None):
    """Best-so-far curves: ``series`` is [(name, xs, ys)], drawn as steps with a dot at each improvement."""
    def draw():
        figure = _figure(8.5, max(3.8, min(16.0, 0.9 + 0.16 * len(series) / (1 + len(series) // 24))))
        axes = figure.subplots()
        for k, (name, xs, ys) in enumerate(series):
            if not xs:
                continue
            color = PALETTE[k % len(PALETTE)]
            axes.step(xs, ys, where="post", color=color, label=name, linewidth=1.6)
            improved = [(x, v) for i, (x, v) in enumerate(zip(xs, ys)) if i == 0 or v != ys[i - 1]]
            axes.plot([p[0] for p in improved], [p[1] for p in improved], "o", color=color, markersize=3.5)
        if reference is not None:
            axes.axhline(reference, color="#333", linestyle="--", linewidth=0.8)
        axes.set_xlabel(xlabel)
        axes.set_ylabel(ylabel)
        axes.set_title(title)
        axes.grid(True, axis="y", color="#e4e7ec")
        if len(series) > 1:
            axes.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), ncol=1 + len(series) // 24, fontsize=7)
        return _wrap(figure, caption)
    return _guard(draw)
