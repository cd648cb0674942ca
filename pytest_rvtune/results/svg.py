"""Charts as inline SVG text for the HTML report: a heatmap, a scatter plot, a line chart per parameter and a
roofline, with hover tooltips.

Hand-written SVG rather than matplotlib's: a few kilobytes per chart, crisp at any zoom, text that stays text
(selectable, searchable), a ``<title>`` tooltip per cell and point, and no plotting library needed to read a
report. Every string that reaches the markup goes through :func:`html.escape` (config values and kernel names
come from users). Nothing here knows records or pytest: callers pass numbers and labels.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

#: Sequential colour scale, light (low = better) to dark: ColorBrewer's YlOrRd, as the PNG heatmaps use.
SCALE = ("#ffffcc", "#ffeda0", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#b10026")
FAILED_FILL = "#d0d4da"
EMPTY_FILL = "#f3f4f6"
BEST_STROKE = "#1d4ed8"
DEFAULT_STROKE = "#111827"  # the untuned default config's cell: dashed
POINT_FILL = "#2563eb"
FONT = "font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif\""


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
                label: str, chart_id: str, default: tuple[int, int] | None = None) -> str:
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
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart heatmap" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="{escape(label)}" {FONT} font-size="12">',
           f'<defs><linearGradient id="{gradient}" x1="0" y1="1" x2="0" y2="0">'
           + "".join(f'<stop offset="{i / (len(SCALE) - 1):.3f}" stop-color="{c}"/>' for i, c in enumerate(SCALE))
           + "</linearGradient></defs>",
           f'<text x="{left + grid_w / 2}" y="14" text-anchor="middle" font-weight="600">{escape(col_title)}</text>',
           f'<text transform="translate(14 {top + grid_h / 2}) rotate(-90)" text-anchor="middle" '
           f'font-weight="600">{escape(row_title)}</text>']
    for j, name in enumerate(col_labels):
        out.append(f'<text x="{left + cell_w * (j + 0.5)}" y="{top - 8}" text-anchor="middle" '
                   f'fill="#4b5563">{escape(name)}</text>')
    for i, name in enumerate(row_labels):
        out.append(f'<text x="{left - 8}" y="{top + cell_h * (i + 0.5) + 4}" text-anchor="end" '
                   f'fill="#4b5563">{escape(name)}</text>')
        for j, cell in enumerate(cells[i]):
            x, y = left + cell_w * j, top + cell_h * i
            if cell.value is not None:
                fraction = scale.fraction(cell.value)
                fill, ink = colour(fraction), "#ffffff" if _dark(fraction) else "#111827"
            else:
                fill, ink = (FAILED_FILL if cell.failed else EMPTY_FILL), "#374151"
            out.append(f'<g class="cell"><title>{escape(cell.tooltip)}</title>'
                       f'<rect x="{x}" y="{y}" width="{cell_w}" height="{cell_h}" fill="{fill}" '
                       f'stroke="#ffffff" stroke-width="2"/>'
                       f'<text x="{x + cell_w / 2}" y="{y + cell_h / 2 + 4}" text-anchor="middle" fill="{ink}" '
                       f'font-variant-numeric="tabular-nums">{escape(cell.text)}</text></g>')
    if default is not None:
        di, dj = default
        box = (f'x="{left + cell_w * dj + 5}" y="{top + cell_h * di + 5}" width="{cell_w - 10}" '
               f'height="{cell_h - 10}" fill="none" rx="2"')
        # white under black dashes: seen on the palest and the darkest cell alike
        out.append(f'<g class="default"><title>the untuned default config</title><rect {box} stroke="#ffffff" '
                   f'stroke-width="3"/><rect {box} stroke="{DEFAULT_STROKE}" stroke-width="2" '
                   f'stroke-dasharray="5 3"/></g>')
    bi, bj = best
    out.append(f'<rect class="best" x="{left + cell_w * bj + 1.5}" y="{top + cell_h * bi + 1.5}" '
               f'width="{cell_w - 3}" height="{cell_h - 3}" fill="none" stroke="{BEST_STROKE}" stroke-width="3" '
               f'rx="3"/>')
    bar_h = max(grid_h, 60)
    out += [f'<rect x="{legend_x}" y="{top}" width="14" height="{bar_h}" fill="url(#{gradient})" rx="2"/>',
            f'<text x="{legend_x + 20}" y="{top + 10}" fill="#4b5563">{escape(legend[1])}</text>',
            f'<text x="{legend_x + 20}" y="{top + bar_h}" fill="#4b5563">{escape(legend[0])}</text>']
    if scale.title:  # which scale the colours follow, under the bar
        out.append(f'<text class="scale" x="{legend_x}" y="{top + bar_h + 16}" fill="#4b5563" font-size="11">'
                   f'{escape(scale.title)}</text>')
    out.append("</svg>")
    return "\n".join(out)


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
                y_format: Callable[[float], str], label: str, note: str = "") -> str:
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

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart scatter" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="{escape(label)}" {FONT} font-size="11">',
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#d1d5db"/>']
    for tick in x_ticks:
        x = px(tick)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#e5e7eb"/>'
                   f'<text x="{x:.1f}" y="{top + plot_h + 15}" text-anchor="middle" fill="#4b5563">'
                   f'{escape(x_format(tick))}</text>')
    for tick in y_ticks:
        y = py(tick)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#e5e7eb"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#4b5563">'
                   f'{escape(y_format(tick))}</text>')
    for point in sorted(points, key=lambda p: p.highlight):
        x, y = px(point.x), py(point.y)
        if point.highlight:
            shape = (f'<path d="M{x:.1f} {y - 8:.1f}L{x + 8:.1f} {y:.1f}L{x:.1f} {y + 8:.1f}L{x - 8:.1f} {y:.1f}Z" '
                     'fill="#f97316" stroke="#7c2d12" stroke-width="1.2"/>')
        else:
            shape = (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{POINT_FILL}" fill-opacity="0.7" '
                     'stroke="#1e3a8a" stroke-width="0.8"/>')
        out.append(f'<g class="point"><title>{escape(point.tooltip)}</title>{shape}</g>')
    out += [f'<text x="{left + plot_w / 2}" y="{height - 10}" text-anchor="middle" font-weight="600">'
            f'{escape(x_title)}</text>',
            f'<text transform="translate(14 {top + plot_h / 2}) rotate(-90)" text-anchor="middle" '
            f'font-weight="600">{escape(y_title)}</text>']
    if note:
        out.append(f'<text x="{left + plot_w - 6}" y="{top + 14}" text-anchor="end" fill="#6b7280">'
                   f'{escape(note)}</text>')
    out.append("</svg>")
    return "\n".join(out)


@dataclass(frozen=True)
class Series:
    name: str  # the legend's text
    values: Sequence[float | None]  # one per x position (None: no point there)
    colour: str
    dashed: bool = False
    tooltips: Sequence[str] = ()  # one per x position


def line_chart_svg(x_labels: Sequence[str], series: Sequence[Series], x_title: str, y_title: str,
                   y_format: Callable[[float], str], label: str, mark: int | None = None) -> str:
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

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart lines" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="{escape(label)}" {FONT} font-size="11">',
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#d1d5db"/>']
    for tick in ticks:
        y = py(tick)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#e5e7eb"/>'
                   f'<text x="{left - 5}" y="{y + 4:.1f}" text-anchor="end" fill="#4b5563">'
                   f'{escape(y_format(tick))}</text>')
    for i, name in enumerate(x_labels):
        out.append(f'<text x="{px(i):.1f}" y="{top + plot_h + 14}" text-anchor="middle" fill="#4b5563">'
                   f'{escape(name)}</text>')
    for s in series:
        points = [(px(i), py(v)) for i, v in enumerate(s.values) if v is not None]
        dash = ' stroke-dasharray="5 4"' if s.dashed else ""
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            out.append(f'<polyline class="series" points="{path}" fill="none" stroke="{s.colour}" '
                       f'stroke-width="2"{dash}/>')
        for i, v in enumerate(s.values):
            if v is None:
                continue
            tip = s.tooltips[i] if i < len(s.tooltips) else f"{x_labels[i]}: {y_format(v)}"
            out.append(f'<g class="point"><title>{escape(tip)}</title><circle cx="{px(i):.1f}" cy="{py(v):.1f}" '
                       f'r="3.5" fill="{s.colour}"/></g>')
    if mark is not None and series and series[0].values[mark] is not None:
        x, y = px(mark), py(series[0].values[mark] or 0.0)
        out.append(f'<path class="mark" d="M{x:.1f} {y - 7:.1f}L{x + 7:.1f} {y:.1f}L{x:.1f} {y + 7:.1f}'
                   f'L{x - 7:.1f} {y:.1f}Z" fill="#f97316" stroke="#7c2d12" stroke-width="1.2"/>')
    legend_x = left + 4.0
    for s in series:
        dash = ' stroke-dasharray="5 4"' if s.dashed else ""
        out.append(f'<line x1="{legend_x}" y1="{top - 12}" x2="{legend_x + 18}" y2="{top - 12}" '
                   f'stroke="{s.colour}" stroke-width="2"{dash}/><text x="{legend_x + 22}" y="{top - 8}" '
                   f'fill="#374151">{escape(s.name)}</text>')
        legend_x += 30 + 6.5 * len(s.name)
    out += [f'<text x="{left + plot_w / 2}" y="{height - 8}" text-anchor="middle" font-weight="600">'
            f'{escape(x_title)}</text>',
            f'<text transform="translate(12 {top + plot_h / 2}) rotate(-90)" text-anchor="middle" '
            f'font-weight="600">{escape(y_title)}</text>', "</svg>"]
    return "\n".join(out)


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten covering [lo, hi] (at least two)."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return [10.0 ** k for k in range(first, max(last, first + 1) + 1)]


def roofline_svg(points: Sequence[Point], peak: float, bandwidth: float, x_title: str, y_title: str,
                 label: str, roof_note: str) -> str:
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

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart roofline" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="{escape(label)}" {FONT} font-size="11">',
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#d1d5db"/>']
    for tick in x_ticks:
        out.append(f'<line x1="{px(tick):.1f}" y1="{top}" x2="{px(tick):.1f}" y2="{top + plot_h}" '
                   f'stroke="#e5e7eb"/><text x="{px(tick):.1f}" y="{top + plot_h + 15}" text-anchor="middle" '
                   f'fill="#4b5563">{escape(f"{tick:g}")}</text>')
    for tick in y_ticks:
        out.append(f'<line x1="{left}" y1="{py(tick):.1f}" x2="{left + plot_w}" y2="{py(tick):.1f}" '
                   f'stroke="#e5e7eb"/><text x="{left - 6}" y="{py(tick) + 4:.1f}" text-anchor="end" '
                   f'fill="#4b5563">{escape(f"{tick:g}")}</text>')
    x_start = max(x_ticks[0], y_ticks[0] / bandwidth)
    roof = [(x_start, bandwidth * x_start), (ridge, peak), (x_ticks[-1], peak)]
    out.append('<polyline class="roof" points="' + " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in roof)
               + '" fill="none" stroke="#111827" stroke-width="2"/>')
    out.append(f'<text x="{left + plot_w - 4}" y="{py(peak) - 8:.1f}" text-anchor="end" fill="#111827">'
               f'{escape(roof_note)}</text>')  # above the roof: every point is under it
    for point in sorted(points, key=lambda p: p.highlight):
        if point.x <= 0 or point.y <= 0:
            continue
        x, y = px(point.x), py(point.y)
        if point.highlight:
            shape = (f'<path d="M{x:.1f} {y - 7:.1f}L{x + 7:.1f} {y:.1f}L{x:.1f} {y + 7:.1f}L{x - 7:.1f} {y:.1f}Z" '
                     'fill="#f97316" stroke="#7c2d12" stroke-width="1.2"/>')
        else:
            shape = (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{POINT_FILL}" fill-opacity="0.6" '
                     'stroke="#1e3a8a" stroke-width="0.8"/>')
        out.append(f'<g class="point"><title>{escape(point.tooltip)}</title>{shape}</g>')
    out += [f'<text x="{left + plot_w / 2}" y="{height - 10}" text-anchor="middle" font-weight="600">'
            f'{escape(x_title)}</text>',
            f'<text transform="translate(14 {top + plot_h / 2}) rotate(-90)" text-anchor="middle" '
            f'font-weight="600">{escape(y_title)}</text>', "</svg>"]
    return "\n".join(out)
