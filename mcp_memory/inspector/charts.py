"""Charts drawn on the server as SVG: no script runs in the page (the Content-Security-Policy
forbids all of them), and the pictures work offline and at any zoom.

Each chart is a bar chart with a title, a labelled axis and a legend; every bar carries a
`<title>` with its figure, which a screen reader or a pointer shows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

WIDTH, HEIGHT = 640, 220
LEFT, BOTTOM, TOP = 44, 28, 12
COLOURS = ("#2f6db5", "#d08c1f", "#4e9a52", "#9a4e8c", "#7a7a7a")


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float]


def bars(title: str, labels: Sequence[str], series: Sequence[Series]) -> Markup:
    """Stacked bars, one per label, one colour per series; the legend names the series."""
    totals = [sum(s.values[i] for s in series) for i in range(len(labels))]
    top = _nice(max(totals, default=0))
    plot_w, plot_h = WIDTH - LEFT - 8, HEIGHT - BOTTOM - TOP
    step = plot_w / max(len(labels), 1)
    width = max(step * 0.7, 1.0)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT + 18 * len(series)}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - 8}" y2="{TOP + plot_h}" stroke="#555"/>',
    ]
    for fraction in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - fraction)
        parts.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{_figure(top * fraction)}</text>'
        )
    for i, label in enumerate(labels):
        x = LEFT + i * step + (step - width) / 2
        base: float = TOP + plot_h
        for colour, s in zip(COLOURS, series, strict=False):
            h = plot_h * s.values[i] / top if top else 0
            if h > 0:
                parts.append(
                    f'<rect class="bar" x="{x:.1f}" y="{base - h:.1f}" width="{width:.1f}" height="{h:.1f}" '
                    f'fill="{colour}"><title>{escape(label)}: {escape(s.name)} {_figure(s.values[i])}</title>'
                    "</rect>"
                )
            base -= h
        if len(labels) <= 12 or i % math.ceil(len(labels) / 12) == 0:
            parts.append(
                f'<text x="{x + width / 2:.1f}" y="{HEIGHT - 10}" text-anchor="middle" font-size="11">'
                f"{escape(label)}</text>"
            )
    for n, (colour, s) in enumerate(zip(COLOURS, series, strict=False)):
        y = HEIGHT + 4 + 18 * n
        parts.append(f'<rect x="{LEFT}" y="{y}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{LEFT + 18}" y="{y + 11}" font-size="12">{escape(s.name)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _nice(value: float) -> float:
    """The axis top: 1, 2 or 5 times a power of ten at or above the value."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= value))


def _figure(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.2g}"
