"""Charts as inline SVG text for the HTML report: a heatmap, a scatter plot, a line chart per parameter and a
roofline, with hover tooltips.

Hand-drawn SVG rather than matplotlib's: a few kilobytes per chart, crisp at any zoom, text that stays text
(selectable, searchable), a ``<title>`` tooltip per cell and point, and no plotting library needed to read a
report. This module computes each chart's geometry as data (Shape: a tag, attributes, text, tooltip); the
template ``templates/chart.svg.j2`` writes the markup with autoescape on, so every string (config values and
kernel names come from users) is escaped. Nothing here knows records or pytest: callers pass numbers and
labels.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from markupsafe import Markup

from pytest_rvtune.results.templating import environment

#: Sequential colour scale, light (low = better) to dark: ColorBrewer's YlOrRd, as the PNG heatmaps use.
SCALE = ("#ffffcc", "#ffeda0", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#b10026")
FAILED_FILL = "#d0d4da"
EMPTY_FILL = "#f3f4f6"
BEST_STROKE = "#1d4ed8"
DEFAULT_STROKE = "#111827"  # the untuned default config's cell: dashed
POINT_FILL = "#2563eb"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
AXIS_INK = "#4b5563"
GRID = "#e5e7eb"
HIGHLIGHT_FILL, HIGHLIGHT_STROKE = "#f97316", "#7c2d12"  # the winner's diamond


def colour(fraction: float) -> str:
    """The scale's colour at ``fraction`` (0 = lowest value, 1 = highest), interpolated between stops."""
    fraction = min(max(fraction, 0.0), 1.0) * (len(SCALE) - 1)
    index = min(int(fraction), len(SCALE) - 2)
    low, high = SCALE[index], SCALE[index + 1]
    mix = fraction - index
    channels = (round(int(low[i:i + 2], 16) * (1 - mix) + int(high[i:i + 2], 16) * mix) for i in (1, 3, 5))
    return "#" + "".join(f"{c:02x}" for c in channels)


@dataclass(frozen=True)
class ColourScale:
    """Where each value sits on the colour scale (0 = lowest, 1 = highest), and what kind of scale that is.

    ``log``: by log(value), so a 10x outlier takes one step of the scale, not the whole of it (on a linear scale
    one slow config paints every other cell the same pale yellow). ``rank``: by the value's place among the
    distinct values, used when even the log scale would leave more than half of the colours to one gap that cuts
    off a few outliers (at most a tenth of the values, or one: one config 100x off the rest), or when a value is
    not positive. Two large clusters (jacobi's 15 slow and 10 fast cells) keep the log scale: the gap between them
    is what the reader should see."""

    kind: str  # "log" or "rank" (or "linear" for a scale of one value)
    lo: float
    hi: float
    ranks: dict[float, float]  # the rank scale's fraction of each distinct value

    def fraction(self, value: float) -> float:
        if self.kind == "rank":
            return self.ranks.get(value, 0.0)
        if self.kind == "log":
            return (math.log(value) - math.log(self.lo)) / (math.log(self.hi) - math.log(self.lo))
        return 0.0

    @property
    def title(self) -> str:
        return {"log": "log scale", "rank": "rank scale"}.get(self.kind, "")


#: The largest share of the log scale one gap between neighbouring values may take before the rank scale is used.
MAX_GAP = 0.5


def colour_scale(values: Sequence[float]) -> ColourScale:
    """The scale for ``values``: log, or rank when one outlier would still wash the log scale out."""
    distinct = sorted(set(values))
    ranks = {v: i / (len(distinct) - 1) for i, v in enumerate(distinct)} if len(distinct) > 1 else {}
    if len(distinct) < 2:
        return ColourScale("linear", distinct[0] if distinct else 0.0, distinct[0] if distinct else 0.0, {})
    lo, hi = distinct[0], distinct[-1]
    if lo <= 0:
        return ColourScale("rank", lo, hi, ranks)
    span = math.log(hi) - math.log(lo)
    gaps = [(math.log(b) - math.log(a)) / span for a, b in itertools.pairwise(distinct)]
    widest = max(range(len(gaps)), key=gaps.__getitem__)
    cut_off = min(widest + 1, len(distinct) - widest - 1)  # the values on the smaller side of the widest gap
    if len(distinct) > 2 and gaps[widest] > MAX_GAP and cut_off <= max(1, len(distinct) // 10):
        return ColourScale("rank", lo, hi, ranks)
    return ColourScale("log", lo, hi, ranks)


def _dark(fraction: float) -> bool:
    """Whether a cell at this point of the scale needs white text."""
    return fraction > 0.6


@dataclass(frozen=True)
class HeatCell:
    value: float | None  # None: no valid config in this cell
    text: str  # what the cell shows ("fail", a formatted number, or "")
    tooltip: str
    failed: bool = False  # tried, but no config of it gave a valid result


def heatmap_svg(cells: Sequence[Sequence[HeatCell]], row_labels: Sequence[str], col_labels: Sequence[str],
                row_title: str, col_title: str, legend: tuple[str, str], best: tuple[int, int],
                label: str, chart_id: str, default: tuple[int, int] | None = None) -> Markup:
    """A grid of coloured cells (rows x columns), the best cell outlined, the ``default`` cell (the untuned
    config's) outlined dashed, a colour legend from legend[0] (low) to legend[1] (high) saying which scale the
    colours follow (colour_scale). ``label`` is the chart's accessible name; ``chart_id`` (letters, digits,
    dashes) is unique in the page, for the legend's gradient."""
    cell_w = max(64, 8 * max((len(t) for t in col_labels), default=0) + 12,
                 7 * max((len(c.text) for row in cells for c in row), default=0) + 14)
    cell_h = 34
    left = max(64, 8 * max((len(t) for t in row_labels), default=0) + 40)
    top = 44
    grid_w, grid_h = cell_w * len(col_labels), cell_h * len(row_labels)
    legend_x = left + grid_w + 28
    width, height = legend_x + 110, top + max(grid_h, 60) + 26
    scale = colour_scale([c.value for row in cells for c in row if c.value is not None])
    gradient = f"{chart_id}-scale"
    stops = [Shape("stop", {"offset": f"{i / (len(SCALE) - 1):.3f}", "stop-color": c}) for i, c in enumerate(SCALE)]
    shapes = [Shape("defs", children=[Shape("linearGradient", {"id": gradient, "x1": 0, "y1": 1, "x2": 0, "y2": 0},
                                            children=stops)]),
              Shape("text", {"x": left + grid_w / 2, "y": 14, "text-anchor": "middle", "font-weight": 600},
                    col_title),
              Shape("text", {"transform": f"translate(14 {top + grid_h / 2}) rotate(-90)", "text-anchor": "middle",
                             "font-weight": 600}, row_title)]
    shapes += [Shape("text", {"x": left + cell_w * (j + 0.5), "y": top - 8, "text-anchor": "middle",
                              "fill": AXIS_INK}, name) for j, name in enumerate(col_labels)]
    for i, name in enumerate(row_labels):
        shapes.append(Shape("text", {"x": left - 8, "y": top + cell_h * (i + 0.5) + 4, "text-anchor": "end",
                                     "fill": AXIS_INK}, name))
        for j, cell in enumerate(cells[i]):
            x, y = left + cell_w * j, top + cell_h * i
            if cell.value is not None:
                fraction = scale.fraction(cell.value)
                fill, ink = colour(fraction), "#ffffff" if _dark(fraction) else "#111827"
            else:
                fill, ink = (FAILED_FILL if cell.failed else EMPTY_FILL), "#374151"
            shapes.append(Shape("g", {"class": "cell"}, title=cell.tooltip, children=[
                Shape("rect", {"x": x, "y": y, "width": cell_w, "height": cell_h, "fill": fill, "stroke": "#ffffff",
                               "stroke-width": 2}),
                Shape("text", {"x": x + cell_w / 2, "y": y + cell_h / 2 + 4, "text-anchor": "middle", "fill": ink,
                               "font-variant-numeric": "tabular-nums"}, cell.text)]))
    if default is not None:
        di, dj = default
        box: Attrs = {"x": left + cell_w * dj + 5, "y": top + cell_h * di + 5, "width": cell_w - 10,
                      "height": cell_h - 10, "fill": "none", "rx": 2}
        # white under black dashes: seen on the palest and the darkest cell alike
        shapes.append(Shape("g", {"class": "default"}, title="the untuned default config", children=[
            Shape("rect", box | {"stroke": "#ffffff", "stroke-width": 3}),
            Shape("rect", box | {"stroke": DEFAULT_STROKE, "stroke-width": 2, "stroke-dasharray": "5 3"})]))
    bi, bj = best
    shapes.append(Shape("rect", {"class": "best", "x": left + cell_w * bj + 1.5, "y": top + cell_h * bi + 1.5,
                                 "width": cell_w - 3, "height": cell_h - 3, "fill": "none", "stroke": BEST_STROKE,
                                 "stroke-width": 3, "rx": 3}))
    bar_h = max(grid_h, 60)
    shapes += [Shape("rect", {"x": legend_x, "y": top, "width": 14, "height": bar_h, "fill": f"url(#{gradient})",
                              "rx": 2}),
               Shape("text", {"x": legend_x + 20, "y": top + 10, "fill": AXIS_INK}, legend[1]),
               Shape("text", {"x": legend_x + 20, "y": top + bar_h, "fill": AXIS_INK}, legend[0])]
    if scale.title:  # which scale the colours follow, under the bar
        shapes.append(Shape("text", {"class": "scale", "x": legend_x, "y": top + bar_h + 16, "fill": AXIS_INK,
                                     "font-size": 11}, scale.title))
    return chart("heatmap", width, height, label, 12, shapes)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values (steps of 1, 2, 2.5 or 5 x 10^n) covering [lo, hi]."""
    if not hi > lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [first + k * step for k in range(int((hi - first) / step + 1e-9) + 1)]


def _padded(lo: float, hi: float) -> tuple[float, float]:
    """A little room beyond the outermost ticks, so a point on the edge is drawn whole."""
    pad = (hi - lo) * 0.07 or 1.0
    return lo - pad, hi + pad


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    tooltip: str
    highlight: bool = False  # the best config: drawn on top, in another colour


def scatter_svg(points: Sequence[Point], x_title: str, y_title: str, x_format: Callable[[float], str],
                y_format: Callable[[float], str], label: str, note: str = "") -> Markup:
    """Points on linear axes with round ticks; highlighted points drawn last as larger orange diamonds."""
    width, height = 460, 300
    left, right, top, bottom = 78, 16, 22, 48
    xs, ys = [p.x for p in points], [p.y for p in points]
    x_ticks = nice_ticks(min(xs), max(xs)) if xs else [0.0, 1.0]
    y_ticks = nice_ticks(min(ys), max(ys)) if ys else [0.0, 1.0]
    x_lo, x_hi = _padded(min(x_ticks[0], *xs), max(x_ticks[-1], *xs))
    y_lo, y_hi = _padded(min(y_ticks[0], *ys), max(y_ticks[-1], *ys))
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x_lo) / ((x_hi - x_lo) or 1.0) * plot_w

    def py(y: float) -> float:
        return top + plot_h - (y - y_lo) / ((y_hi - y_lo) or 1.0) * plot_h

    shapes = [plot_area(left, top, plot_w, plot_h)]
    shapes += x_grid([(px(t), x_format(t)) for t in x_ticks], top, plot_h)
    shapes += y_grid([(py(t), y_format(t)) for t in y_ticks], left, plot_w)
    shapes += [marker(px(p.x), py(p.y), p.tooltip, p.highlight, 8, 4.5, 0.7)
               for p in sorted(points, key=lambda p: p.highlight)]
    shapes += axis_titles(x_title, y_title, left, top, plot_w, plot_h, height)
    if note:
        shapes.append(Shape("text", {"x": left + plot_w - 6, "y": top + 14, "text-anchor": "end", "fill": "#6b7280"},
                            note))
    return chart("scatter", width, height, label, 11, shapes)


@dataclass(frozen=True)
class Series:
    name: str  # the legend's text
    values: Sequence[float | None]  # one per x position (None: no point there)
    colour: str
    dashed: bool = False
    tooltips: Sequence[str] = ()  # one per x position


def line_chart_svg(x_labels: Sequence[str], series: Sequence[Series], x_title: str, y_title: str,
                   y_format: Callable[[float], str], label: str, mark: int | None = None) -> Markup:
    """Lines over categorical x positions (a parameter's values, evenly spaced), round y ticks; ``mark`` draws a
    diamond on the first series at that x (the winner's value)."""
    left, right, top, bottom = 62, 12, 26, 42
    # wider for many values: each keeps room for its label
    width, height = max(300, left + right + 9 * max((len(t) for t in x_labels), default=1) * len(x_labels)), 220
    plot_w, plot_h = width - left - right, height - top - bottom
    ys = [v for s in series for v in s.values if v is not None]
    ticks = nice_ticks(min(ys), max(ys), 4) if ys else [0.0, 1.0]
    y_lo, y_hi = _padded(min(ticks[0], *ys), max(ticks[-1], *ys)) if ys else (0.0, 1.0)
    step = plot_w / max(len(x_labels), 1)

    def px(i: int) -> float:
        return left + step * (i + 0.5)

    def py(y: float) -> float:
        return top + plot_h - (y - y_lo) / ((y_hi - y_lo) or 1.0) * plot_h

    shapes = [plot_area(left, top, plot_w, plot_h)]
    shapes += y_grid([(py(t), y_format(t)) for t in ticks], left, plot_w, gap=5)
    shapes += [Shape("text", {"x": f"{px(i):.1f}", "y": top + plot_h + 14, "text-anchor": "middle",
                              "fill": AXIS_INK}, name) for i, name in enumerate(x_labels)]
    for s in series:
        points = [(px(i), py(v)) for i, v in enumerate(s.values) if v is not None]
        if len(points) > 1:
            line: Attrs = {"class": "series", "points": " ".join(f"{x:.1f},{y:.1f}" for x, y in points),
                           "fill": "none"}
            shapes.append(Shape("polyline", line | series_stroke(s)))
        for i, v in enumerate(s.values):
            if v is not None:
                tip = s.tooltips[i] if i < len(s.tooltips) else f"{x_labels[i]}: {y_format(v)}"
                shapes.append(Shape("g", {"class": "point"}, title=tip, children=[
                    Shape("circle", {"cx": f"{px(i):.1f}", "cy": f"{py(v):.1f}", "r": 3.5, "fill": s.colour})]))
    if mark is not None and series and series[0].values[mark] is not None:
        x, y = px(mark), py(series[0].values[mark] or 0.0)
        shapes.append(Shape("path", {"class": "mark", "d": diamond(x, y, 7), "fill": HIGHLIGHT_FILL,
                                     "stroke": HIGHLIGHT_STROKE, "stroke-width": 1.2}))
    legend_x = left + 4.0
    for s in series:
        key: Attrs = {"x1": legend_x, "y1": top - 12, "x2": legend_x + 18, "y2": top - 12}
        shapes += [Shape("line", key | series_stroke(s)),
                   Shape("text", {"x": legend_x + 22, "y": top - 8, "fill": "#374151"}, s.name)]
        legend_x += 30 + 6.5 * len(s.name)
    shapes += axis_titles(x_title, y_title, left, top, plot_w, plot_h, height, x_below=8, y_left=12)
    return chart("lines", width, height, label, 11, shapes)


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten covering [lo, hi] (at least two)."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return [10.0 ** k for k in range(first, max(last, first + 1) + 1)]


def roofline_svg(points: Sequence[Point], peak: float, bandwidth: float, x_title: str, y_title: str,
                 label: str, roof_note: str) -> Markup:
    """A roofline on log-log axes: y = min(peak, bandwidth * x) over arithmetic intensity x, and one point per
    (x, y); highlighted points as diamonds. ``peak`` and ``bandwidth`` in the units of y and y per unit of x."""
    width, height = 520, 320
    left, right, top, bottom = 70, 16, 22, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    ridge = peak / bandwidth
    xs = [p.x for p in points if p.x > 0] + [ridge]
    ys = [p.y for p in points if p.y > 0] + [peak]
    x_ticks = _log_ticks(min(xs) / 2, max(xs) * 2)
    y_ticks = _log_ticks(min(min(ys), bandwidth * x_ticks[0]) / 2, peak * 2)
    lx0, lx1 = math.log10(x_ticks[0]), math.log10(x_ticks[-1])
    ly0, ly1 = math.log10(y_ticks[0]), math.log10(y_ticks[-1])

    def px(x: float) -> float:
        return left + (math.log10(x) - lx0) / (lx1 - lx0) * plot_w

    def py(y: float) -> float:
        return top + plot_h - (math.log10(y) - ly0) / (ly1 - ly0) * plot_h

    shapes = [plot_area(left, top, plot_w, plot_h)]
    shapes += x_grid([(px(t), f"{t:g}") for t in x_ticks], top, plot_h)
    shapes += y_grid([(py(t), f"{t:g}") for t in y_ticks], left, plot_w)
    x_start = max(x_ticks[0], y_ticks[0] / bandwidth)
    roof = [(x_start, bandwidth * x_start), (ridge, peak), (x_ticks[-1], peak)]
    shapes += [Shape("polyline", {"class": "roof", "points": " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in roof),
                                  "fill": "none", "stroke": "#111827", "stroke-width": 2}),
               # above the roof: every point is under it
               Shape("text", {"x": left + plot_w - 4, "y": f"{py(peak) - 8:.1f}", "text-anchor": "end",
                              "fill": "#111827"}, roof_note)]
    shapes += [marker(px(p.x), py(p.y), p.tooltip, p.highlight, 7, 4, 0.6)
               for p in sorted(points, key=lambda p: p.highlight) if p.x > 0 and p.y > 0]
    shapes += axis_titles(x_title, y_title, left, top, plot_w, plot_h, height)
    return chart("roofline", width, height, label, 11, shapes)


# --- the pieces every chart is made of ----------------------------------------------------------------------

Attrs = dict[str, str | float | int]


@dataclass
class Shape:
    """One SVG element as data: its tag, attributes, text, hover title and children; chart.svg.j2 writes it (and
    escapes every string)."""

    tag: str
    attrs: Attrs = field(default_factory=dict)
    text: str = ""
    title: str = ""  # a <title> child: the browser's tooltip
    children: list[Shape] = field(default_factory=list)


def chart(kind: str, width: float, height: float, label: str, font_size: int, shapes: Sequence[Shape]) -> Markup:
    """The ``<svg>`` of one chart (class ``chart <kind>``), rendered by the chart template."""
    svg: Attrs = {"xmlns": "http://www.w3.org/2000/svg", "class": f"chart {kind}", "viewBox": f"0 0 {width} {height}",
                  "width": width, "height": height, "role": "img", "aria-label": label, "font-family": FONT,
                  "font-size": font_size}
    return Markup(environment().get_template("chart.svg.j2").render(svg=svg, shapes=shapes))


def plot_area(left: float, top: float, width: float, height: float) -> Shape:
    return Shape("rect", {"x": left, "y": top, "width": width, "height": height, "fill": "#fafafa",
                          "stroke": "#d1d5db"})


def x_grid(ticks: Sequence[tuple[float, str]], top: float, height: float) -> list[Shape]:
    """A vertical grid line and a label under the plot per (x, label)."""
    return [shape for x, text in ticks for shape in (
        Shape("line", {"x1": f"{x:.1f}", "y1": top, "x2": f"{x:.1f}", "y2": top + height, "stroke": GRID}),
        Shape("text", {"x": f"{x:.1f}", "y": top + height + 15, "text-anchor": "middle", "fill": AXIS_INK}, text))]


def y_grid(ticks: Sequence[tuple[float, str]], left: float, width: float, gap: float = 6) -> list[Shape]:
    """A horizontal grid line and a label left of the plot per (y, label)."""
    return [shape for y, text in ticks for shape in (
        Shape("line", {"x1": left, "y1": f"{y:.1f}", "x2": left + width, "y2": f"{y:.1f}", "stroke": GRID}),
        Shape("text", {"x": left - gap, "y": f"{y + 4:.1f}", "text-anchor": "end", "fill": AXIS_INK}, text))]


def axis_titles(x_title: str, y_title: str, left: float, top: float, width: float, height: float,
                chart_height: float, x_below: float = 10, y_left: float = 14) -> list[Shape]:
    return [Shape("text", {"x": left + width / 2, "y": chart_height - x_below, "text-anchor": "middle",
                           "font-weight": 600}, x_title),
            Shape("text", {"transform": f"translate({y_left} {top + height / 2}) rotate(-90)",
                           "text-anchor": "middle", "font-weight": 600}, y_title)]


def series_stroke(series: Series) -> Attrs:
    stroke: Attrs = {"stroke": series.colour, "stroke-width": 2}
    if series.dashed:
        stroke["stroke-dasharray"] = "5 4"
    return stroke


def diamond(x: float, y: float, r: float) -> str:
    return f"M{x:.1f} {y - r:.1f}L{x + r:.1f} {y:.1f}L{x:.1f} {y + r:.1f}L{x - r:.1f} {y:.1f}Z"


def marker(x: float, y: float, tooltip: str, highlight: bool, size: float, radius: float, opacity: float) -> Shape:
    """A point with its tooltip: a circle, or (the winner) an orange diamond."""
    if highlight:
        shape = Shape("path", {"d": diamond(x, y, size), "fill": HIGHLIGHT_FILL, "stroke": HIGHLIGHT_STROKE,
                               "stroke-width": 1.2})
    else:
        shape = Shape("circle", {"cx": f"{x:.1f}", "cy": f"{y:.1f}", "r": radius, "fill": POINT_FILL,
                                 "fill-opacity": opacity, "stroke": "#1e3a8a", "stroke-width": 0.8})
    return Shape("g", {"class": "point"}, title=tooltip, children=[shape])
