"""Small charts as SVG, drawn on the server: no JavaScript, no network. Every label is escaped
(token texts and names are untrusted); colours come from presentation attributes, not inline
styles, so that the explorer's Content-Security-Policy can forbid those."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"]
_FONT = 'font-family="sans-serif" font-size="11" fill="#333"'


def _number(value: float) -> str:
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:.3g}"


def bar_chart(values: Sequence[tuple[str, float]], *, title: str, x_label: str, y_label: str, width: int = 640, height: int = 220) -> Markup:
    """Vertical bars, one per ``(label, value)``, in the order given."""
    left, right, top, bottom = 52, 10, 24, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    top_value = max((value for _, value in values), default=0) or 1
    step = plot_w / max(len(values), 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{left}" y="14" {_FONT} font-weight="bold">{escape(title)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#999"/>',
        f'<text x="{left - 6}" y="{top + 4}" {_FONT} text-anchor="end">{escape(_number(top_value))}</text>',
        f'<text x="{left - 6}" y="{top + plot_h}" {_FONT} text-anchor="end">0</text>',
        f'<text x="{left + plot_w / 2}" y="{height - 4}" {_FONT} text-anchor="middle">{escape(x_label)}</text>',
        f'<text x="12" y="{top + plot_h / 2}" {_FONT} text-anchor="middle" transform="rotate(-90 12 {top + plot_h / 2})">{escape(y_label)}</text>',
    ]
    label_every = max(1, len(values) // 16)
    for i, (label, value) in enumerate(values):
        bar_h = plot_h * value / top_value
        x = left + i * step
        parts.append(
            f'<rect x="{x + step * 0.1:.1f}" y="{top + plot_h - bar_h:.1f}" width="{step * 0.8:.1f}" height="{bar_h:.1f}" fill="{PALETTE[0]}">'
            f"<title>{escape(label)}: {escape(_number(value))}</title></rect>"
        )
        if i % label_every == 0:
            parts.append(f'<text x="{x + step / 2:.1f}" y="{top + plot_h + 14}" {_FONT} text-anchor="middle">{escape(label)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def line_chart(
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]], *, title: str, x_label: str, y_label: str,
    width: int = 640, height: int = 260,
) -> Markup:
    """Points joined by lines, one series per ``(name, [(x, y), ...])``, with a legend."""
    left, right, top, bottom = 56, 150, 24, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    points = [point for _, pts in series for point in pts]
    if not points:
        return Markup("")
    x_min, x_max = min(x for x, _ in points), max(x for x, _ in points)
    y_min, y_max = min(y for _, y in points), max(y for _, y in points)
    if x_max == x_min:
        x_min, x_max = x_min - 1, x_max + 1
    if y_max == y_min:
        y_min, y_max = y_min - 0.5, y_max + 0.5

    def sx(x: float) -> float:
        return left + plot_w * (x - x_min) / (x_max - x_min)

    def sy(y: float) -> float:
        return top + plot_h * (1 - (y - y_min) / (y_max - y_min))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{left}" y="14" {_FONT} font-weight="bold">{escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#ccc"/>',
        f'<text x="{left - 6}" y="{top + 4}" {_FONT} text-anchor="end">{escape(_number(y_max))}</text>',
        f'<text x="{left - 6}" y="{top + plot_h}" {_FONT} text-anchor="end">{escape(_number(y_min))}</text>',
        f'<text x="{left}" y="{top + plot_h + 14}" {_FONT} text-anchor="middle">{escape(_number(x_min))}</text>',
        f'<text x="{left + plot_w}" y="{top + plot_h + 14}" {_FONT} text-anchor="middle">{escape(_number(x_max))}</text>',
        f'<text x="{left + plot_w / 2}" y="{height - 4}" {_FONT} text-anchor="middle">{escape(x_label)}</text>',
        f'<text x="12" y="{top + plot_h / 2}" {_FONT} text-anchor="middle" transform="rotate(-90 12 {top + plot_h / 2})">{escape(y_label)}</text>',
    ]
    for index, (name, pts) in enumerate(series):
        colour = PALETTE[index % len(PALETTE)]
        ordered = sorted(pts)
        if len(ordered) > 1:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in ordered)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in ordered:
            parts.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="{colour}">'
                f"<title>{escape(name)}: {escape(_number(x))}, {escape(_number(y))}</title></circle>"
            )
        legend_y = top + 12 + 16 * index
        parts.append(f'<rect x="{left + plot_w + 12}" y="{legend_y - 9}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{left + plot_w + 27}" y="{legend_y}" {_FONT}>{escape(name)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def overlap_bar(only_a: int, shared: int, only_b: int, *, name_a: str, name_b: str, width: int = 640) -> Markup:
    """One stacked bar: tokens only in A, in both, only in B."""
    height, top, bar_h = 64, 22, 22
    total = only_a + shared + only_b or 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        "<title>vocabulary overlap</title>",
        f'<text x="0" y="14" {_FONT} font-weight="bold">vocabulary overlap</text>',
    ]
    x = 0.0
    for label, value, colour in (
        (f"only in {name_a}", only_a, PALETTE[0]), ("shared", shared, "#bbb"), (f"only in {name_b}", only_b, PALETTE[1]),
    ):
        w = width * value / total
        parts.append(f'<rect x="{x:.1f}" y="{top}" width="{w:.1f}" height="{bar_h}" fill="{colour}"><title>{escape(label)}: {value:,}</title></rect>')
        if w > 60:
            parts.append(f'<text x="{x + 4:.1f}" y="{top + 15}" {_FONT}>{escape(_number(value))}</text>')
        x += w
    parts.append(
        f'<text x="0" y="{top + bar_h + 16}" {_FONT}>{escape(f"only in {name_a}: {only_a:,}   shared: {shared:,}   only in {name_b}: {only_b:,}")}</text>'
    )
    parts.append("</svg>")
    return Markup("".join(parts))
