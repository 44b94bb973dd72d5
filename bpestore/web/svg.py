"""Small charts as SVG, drawn on the server: no JavaScript, no network. Every label is escaped
(token texts and names are untrusted); colours come from presentation attributes (which the
stylesheet may override, for the dark theme), not inline styles, so that the explorer's
Content-Security-Policy can forbid those.

Axes have ticks at round numbers (:func:`nice_ticks`: 1, 2 or 5 times a power of ten, about five
per axis; :func:`log_ticks` on a logarithmic axis), labels with their units, and start at zero
where zero means something (counts, bytes per token).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from markupsafe import Markup, escape

from .numbers import number

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"]
_FONT = 'font-family="sans-serif" font-size="11" fill="#333"'
_STEPS = (1.0, 2.0, 5.0, 10.0)


def nice_step(span: float, count: int = 5, *, whole: bool = False) -> float:
    """The round step (1, 2 or 5 times a power of ten) that cuts ``span`` into about ``count``
    parts; at least 1 if ``whole``."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in _STEPS if raw <= m * power * 1.000001)
    return max(step, 1.0) if whole else step


def nice_ticks(low: float, high: float, count: int = 5, *, whole: bool = False) -> list[float]:
    """Round ticks from a multiple of the step at or below ``low`` to one at or above ``high``
    (about ``count`` + 1 of them). ``whole``: whole numbers only."""
    if high < low:
        low, high = high, low
    if high == low:
        high = low + 1 if low == 0 or whole else low + abs(low) * 0.1
    step = nice_step(high - low, count, whole=whole)
    first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    return [_clean(k * step) for k in range(first, last + 1)]


def log_ticks(low: float, high: float) -> list[float]:
    """Ticks for a logarithmic axis over ``low``..``high`` (both > 0): from the last of
    1, 2, 5 times a power of ten at or below ``low`` to the first at or above ``high``; powers of
    ten alone once that makes at least four."""
    if low <= 0 or high <= 0:
        raise ValueError("a logarithmic axis needs positive values")
    low, high = min(low, high), max(low, high)
    if high < low * 1.5:  # one value, or nearly: a span around it
        low, high = low / 1.5, high * 1.5
    start, stop = math.floor(math.log10(low)), math.ceil(math.log10(high))
    for multiples in ((1.0,), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0, 7.0)):
        candidates = sorted({_clean(m * 10.0**power) for power in range(start, stop + 1) for m in multiples})
        below = [c for c in candidates if c <= low * 1.000001]
        above = [c for c in candidates if c >= high / 1.000001]
        first, last = below[-1], above[0]
        ticks = [c for c in candidates if first <= c <= last]
        if len(ticks) >= 4 or (len(ticks) >= 3 and multiples != (1.0,)):
            return ticks
    return ticks


def tick_digits(ticks: Sequence[float]) -> int:
    """The decimals the labels of evenly spaced ``ticks`` need (0.5 steps: 1)."""
    if len(ticks) < 2:
        return 0
    step = abs(ticks[1] - ticks[0])
    return max(0, -math.floor(math.log10(step) + 1e-9)) if step else 0


def _clean(value: float) -> float:
    """``value`` without the float noise of multiplying a step (0.30000000000000004)."""
    return float(f"{value:.12g}")


def _open(width: int, height: int, title: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        f"<title>{escape(title)}</title>",
        f'<text class="chart-title" x="8" y="15" {_FONT} font-weight="bold">{escape(title)}</text>',
    ]


def _axes(
    parts: list[str], *, left: float, top: float, plot_w: float, plot_h: float, height: int,
    x_ticks: Sequence[tuple[float, str]], y_ticks: Sequence[tuple[float, str]], x_label: str, y_label: str,
) -> None:
    """Grid lines, tick marks and labels (ticks as ``(position in pixels, label)``), and the
    axes' titles."""
    bottom = top + plot_h
    for y, label in y_ticks:
        parts.append(f'<line class="grid" x1="{left:.1f}" y1="{y:.1f}" x2="{left + plot_w:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>')
        parts.append(f'<text class="tick y-tick" x="{left - 6:.1f}" y="{y + 4:.1f}" {_FONT} text-anchor="end">{escape(label)}</text>')
    for x, label in x_ticks:
        parts.append(f'<line class="axis" x1="{x:.1f}" y1="{bottom:.1f}" x2="{x:.1f}" y2="{bottom + 4:.1f}" stroke="#777"/>')
        parts.append(f'<text class="tick x-tick" x="{x:.1f}" y="{bottom + 16:.1f}" {_FONT} text-anchor="middle">{escape(label)}</text>')
    parts.append(f'<line class="axis" x1="{left:.1f}" y1="{bottom:.1f}" x2="{left + plot_w:.1f}" y2="{bottom:.1f}" stroke="#777"/>')
    parts.append(f'<line class="axis" x1="{left:.1f}" y1="{top:.1f}" x2="{left:.1f}" y2="{bottom:.1f}" stroke="#777"/>')
    parts.append(f'<text class="axis-label" x="{left + plot_w / 2:.1f}" y="{height - 6}" {_FONT} text-anchor="middle">{escape(x_label)}</text>')
    middle = top + plot_h / 2
    parts.append(f'<text class="axis-label" x="14" y="{middle:.1f}" {_FONT} text-anchor="middle" transform="rotate(-90 14 {middle:.1f})">{escape(y_label)}</text>')


def histogram(counts: Mapping[int, int], *, title: str, x_label: str, y_label: str, width: int = 640, height: int = 240) -> Markup:
    """A bar for every whole number from 1 to the largest key of ``counts`` (those not in it:
    0), on a numeric x axis; the y axis from 0."""
    left, right, top, bottom = 60, 12, 26, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    largest = max((key for key in counts if key >= 1), default=1)
    keys = range(1, largest + 1)
    y_ticks = nice_ticks(0, max(counts.values(), default=0) or 1, whole=True)
    y_top = y_ticks[-1]
    slot = plot_w / len(keys)

    def sx(key: float) -> float:
        return left + slot * (key - 0.5)

    def sy(value: float) -> float:
        return top + plot_h * (1 - value / y_top)

    x_step = int(nice_step(largest, 8, whole=True))
    x_ticks = ([1] if x_step > 2 else []) + list(range(x_step, largest + 1, x_step))
    parts = _open(width, height, title)
    _axes(
        parts, left=left, top=top, plot_w=plot_w, plot_h=plot_h, height=height,
        x_ticks=[(sx(k), number(k)) for k in x_ticks], y_ticks=[(sy(v), number(v)) for v in y_ticks],
        x_label=x_label, y_label=y_label,
    )
    for key in keys:
        value = counts.get(key, 0)
        bar_h = plot_h * value / y_top
        parts.append(
            f'<rect x="{sx(key) - slot * 0.4:.1f}" y="{top + plot_h - bar_h:.1f}" width="{slot * 0.8:.1f}" height="{bar_h:.1f}" fill="{PALETTE[0]}">'
            f"<title>{key}: {escape(number(value))}</title></rect>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def line_chart(
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]], *, title: str, x_label: str, y_label: str,
    log_x: bool = False, y_from_zero: bool = True, width: int = 680, height: int = 280,
) -> Markup:
    """Points joined by lines, one series per ``(name, [(x, y), ...])``, with a legend; a
    logarithmic x axis if ``log_x`` (x > 0), the y axis from 0 if ``y_from_zero``."""
    left, right, top, bottom = 60, 160, 26, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    points = [point for _, pts in series for point in pts if not log_x or point[0] > 0]
    if not points:
        return Markup("")
    xs, ys = [x for x, _ in points], [y for _, y in points]
    if log_x:
        x_ticks = log_ticks(min(xs), max(xs))
    else:
        x_ticks = nice_ticks(min(xs), max(xs))
    y_ticks = nice_ticks(0 if y_from_zero else min(ys), max(ys))
    x_low, x_high, y_low, y_high = x_ticks[0], x_ticks[-1], y_ticks[0], y_ticks[-1]

    def sx(x: float) -> float:
        if log_x:
            return left + plot_w * math.log(x / x_low) / math.log(x_high / x_low)
        return left + plot_w * (x - x_low) / (x_high - x_low)

    def sy(y: float) -> float:
        return top + plot_h * (1 - (y - y_low) / (y_high - y_low))

    x_digits = 0 if log_x else tick_digits(x_ticks)
    y_digits = tick_digits(y_ticks)
    parts = _open(width, height, title)
    _axes(
        parts, left=left, top=top, plot_w=plot_w, plot_h=plot_h, height=height,
        x_ticks=[(sx(x), number(x, x_digits)) for x in x_ticks], y_ticks=[(sy(y), number(y, y_digits)) for y in y_ticks],
        x_label=x_label, y_label=y_label,
    )
    for index, (name, pts) in enumerate(series):
        colour = PALETTE[index % len(PALETTE)]
        ordered = sorted(point for point in pts if not log_x or point[0] > 0)
        if len(ordered) > 1:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in ordered)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in ordered:
            parts.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="{colour}">'
                f"<title>{escape(name)}: {escape(number(x))}, {escape(number(y))}</title></circle>"
            )
        legend_y = top + 12 + 18 * index
        parts.append(f'<rect x="{left + plot_w + 14}" y="{legend_y - 9}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text class="legend" x="{left + plot_w + 29}" y="{legend_y}" {_FONT}>{escape(name)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def overlap_bar(only_a: int, shared: int, only_b: int, *, name_a: str, name_b: str, width: int = 640) -> Markup:
    """One stacked bar: tokens only in A, in both, only in B."""
    height, top, bar_h = 64, 22, 22
    total = only_a + shared + only_b or 1
    parts = _open(width, height, "vocabulary overlap")
    x = 0.0
    for label, value, colour in (
        (f"only in {name_a}", only_a, PALETTE[0]), ("shared", shared, "#bbb"), (f"only in {name_b}", only_b, PALETTE[1]),
    ):
        w = width * value / total
        parts.append(f'<rect x="{x:.1f}" y="{top}" width="{w:.1f}" height="{bar_h}" fill="{colour}"><title>{escape(label)}: {number(value)}</title></rect>')
        if w > 60:
            parts.append(f'<text x="{x + 4:.1f}" y="{top + 15}" {_FONT}>{escape(number(value))}</text>')
        x += w
    parts.append(
        f'<text x="8" y="{top + bar_h + 16}" {_FONT}>'
        f'{escape(f"only in {name_a}: {number(only_a)}   shared: {number(shared)}   only in {name_b}: {number(only_b)}")}</text>'
    )
    parts.append("</svg>")
    return Markup("".join(parts))


def _short(label: str, limit: int) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def horizontal_bars(
    items: Sequence[tuple[str, float]], *, title: str, x_label: str, digits: int = 3, width: int = 640,
) -> Markup:
    """A horizontal bar per ``(label, value)`` (values ≥ 0), in the order given, on an x axis
    from 0 with round ticks; each bar's value at its end."""
    if not items:
        return Markup("")
    label_chars = min(max(len(label) for label, _ in items), 28)
    left, right, top, bottom, bar_slot = 16 + 7 * label_chars, 56, 26, 44, 24
    plot_w, plot_h = width - left - right, bar_slot * len(items)
    height = top + plot_h + bottom
    ticks = nice_ticks(0, max(value for _, value in items) or 1)
    high = ticks[-1]

    def sx(value: float) -> float:
        return left + plot_w * value / high

    parts = _open(width, height, title)
    tick_labels = tick_digits(ticks)
    _axes(
        parts, left=left, top=top, plot_w=plot_w, plot_h=plot_h, height=height,
        x_ticks=[(sx(t), number(t, tick_labels)) for t in ticks], y_ticks=[], x_label=x_label, y_label="",
    )
    for x in ticks[1:]:
        parts.append(f'<line class="grid" x1="{sx(x):.1f}" y1="{top}" x2="{sx(x):.1f}" y2="{top + plot_h}" stroke="#e3e3e3"/>')
    for index, (label, value) in enumerate(items):
        y = top + bar_slot * index
        shown = escape(number(value, digits))
        parts.append(
            f'<rect class="bar" x="{left}" y="{y + 4}" width="{sx(value) - left:.1f}" height="{bar_slot - 8}" fill="{PALETTE[0]}">'
            f"<title>{escape(label)}: {shown}</title></rect>"
        )
        parts.append(f'<text class="tick y-tick" x="{left - 6}" y="{y + bar_slot / 2 + 4:.1f}" {_FONT} text-anchor="end">{escape(_short(label, 28))}</text>')
        parts.append(f'<text class="bar-value" x="{sx(value) + 4:.1f}" y="{y + bar_slot / 2 + 4:.1f}" {_FONT}>{shown}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


_COOL, _NEUTRAL, _WARM = (33, 102, 172), (247, 247, 247), (178, 24, 43)


def diverging_colour(value: float, spread: float) -> str:
    """The colour of ``value`` (> 0) on a scale that is neutral at 1, blue below and red above,
    even in the logarithm: ``1 / spread`` and ``spread`` (> 1) are the ends, beyond them
    clamped."""
    t = max(-1.0, min(1.0, math.log(value) / math.log(spread))) if value > 0 else -1.0
    end = _WARM if t > 0 else _COOL
    mixed = [round(n + (e - n) * abs(t)) for n, e in zip(_NEUTRAL, end)]
    return "#{:02x}{:02x}{:02x}".format(*mixed)


def _is_dark(colour: str) -> bool:
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return 0.299 * red + 0.587 * green + 0.114 * blue < 140


def heat_map(
    rows: Sequence[str], columns: Sequence[str], values: Sequence[Sequence[float | None]], *,
    title: str, legend_label: str, digits: int = 2,
) -> Markup:
    """A grid of cells, a row per ``rows`` label and a column per ``columns`` label, each
    coloured by its value (:func:`diverging_colour`: neutral at 1, the scale's ends the most
    extreme value's ratio to 1, at least 2) and showing it; an empty cell for None. A legend
    of the scale below. Cells carry ``data-row`` and ``data-column``."""
    if not rows or not columns:
        return Markup("")
    present = [v for line in values for v in line if v is not None and v > 0]
    spread = max([2.0] + [max(v, 1 / v) for v in present])
    row_chars = min(max(len(label) for label in rows), 28)
    column_chars = min(max(len(label) for label in columns), 14)
    cell_w, cell_h = max(52, 7 * column_chars + 10), 26
    left, top = 16 + 7 * row_chars, 44
    steps = [spread ** (k / 3) for k in range(-3, 4)]  # the legend's swatches: 1/spread to spread, even in the logarithm
    swatch, legend_left = 44, 8 + 7 * min(len(legend_label), 40) + 10
    width = max(left + cell_w * len(columns) + 12, legend_left + swatch * len(steps) + 8)
    legend_top = top + cell_h * len(rows) + 18
    height = legend_top + 44
    parts = _open(width, height, title)
    for j, label in enumerate(columns):
        parts.append(
            f'<text class="tick x-tick" x="{left + cell_w * (j + 0.5):.1f}" y="{top - 8}" {_FONT} text-anchor="middle">'
            f"<title>{escape(label)}</title>{escape(_short(label, 14))}</text>"
        )
    for i, label in enumerate(rows):
        y = top + cell_h * i
        parts.append(f'<text class="tick y-tick" x="{left - 6}" y="{y + cell_h / 2 + 4:.1f}" {_FONT} text-anchor="end"><title>{escape(label)}</title>{escape(_short(label, 28))}</text>')
        for j, column in enumerate(columns):
            value = values[i][j]
            x = left + cell_w * j
            data = f'data-row="{escape(label)}" data-column="{escape(column)}"'
            if value is None or value <= 0:
                parts.append(f'<rect class="cell empty" {data} x="{x}" y="{y}" width="{cell_w}" height="{cell_h}" fill="none" stroke="#ccc"><title>{escape(label)} on {escape(column)}: none</title></rect>')
                continue
            colour = diverging_colour(value, spread)
            shown = escape(number(value, digits))
            parts.append(
                f'<rect class="cell" {data} x="{x}" y="{y}" width="{cell_w}" height="{cell_h}" fill="{colour}" stroke="#fff">'
                f"<title>{escape(label)} on {escape(column)}: {shown}</title></rect>"
            )
            ink = "cell-light" if _is_dark(colour) else "cell-dark"
            parts.append(f'<text class="cell-value {ink}" {data} x="{x + cell_w / 2:.1f}" y="{y + cell_h / 2 + 4:.1f}" {_FONT} text-anchor="middle">{shown}</text>')
    parts.append(f'<text class="legend" x="8" y="{legend_top + 14}" {_FONT}>{escape(legend_label)}</text>')
    for k, value in enumerate(steps):
        x = legend_left + swatch * k
        colour = diverging_colour(value, spread)
        parts.append(f'<rect class="legend-swatch" x="{x}" y="{legend_top + 2}" width="{swatch}" height="16" fill="{colour}"/>')
        parts.append(f'<text class="legend" x="{x + swatch / 2}" y="{legend_top + 32}" {_FONT} text-anchor="middle">{escape(number(value, 2))}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
