"""Small inline SVG bar charts (no plotting library, no script): the ledger's plots."""

from __future__ import annotations

import html
from collections.abc import Sequence

Series = tuple[str, Sequence[float], str]
"""``(name, one value per label, colour)``."""


def bar_chart(
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    unit: str = "",
    width: int = 720,
    height: int = 220,
    stacked: bool = True,
) -> str:
    """Bars per label (stacked series), a y-axis maximum, a legend; empty data gives a note."""
    n = len(labels)
    totals = [sum(s[1][i] for s in series) if stacked else max((s[1][i] for s in series), default=0) for i in range(n)]
    top = max(totals, default=0)
    left, right, top_pad, bottom = 56, 10, 28, 34
    plot_w, plot_h = width - left - right, height - top_pad - bottom
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}" font-size="11" '
        'font-family="sans-serif">',
        f'<text x="{left}" y="16" font-weight="bold">{html.escape(title)}</text>',
    ]
    if n == 0 or top <= 0:
        out.append(f'<text x="{left}" y="{top_pad + 20}" fill="#777">no data yet</text></svg>')
        return "\n".join(out)
    out.append(f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{top_pad + plot_h}" stroke="#888"/>')
    out.append(
        f'<line x1="{left}" y1="{top_pad + plot_h}" x2="{left + plot_w}" y2="{top_pad + plot_h}" stroke="#888"/>'
    )
    out.append(f'<text x="{left - 4}" y="{top_pad + 4}" text-anchor="end">{_num(top)}{unit}</text>')
    out.append(f'<text x="{left - 4}" y="{top_pad + plot_h}" text-anchor="end">0</text>')
    slot = plot_w / n
    bar = max(2.0, slot * 0.7)
    every = max(1, round(n / 24))
    for i, label in enumerate(labels):
        x = left + i * slot + (slot - bar) / 2
        base: float = top_pad + plot_h
        for name, values, colour in series:
            h = plot_h * values[i] / top
            y = base - h if stacked else top_pad + plot_h - h
            out.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" fill="{colour}">'
                f"<title>{html.escape(label)} {html.escape(name)}: {_num(values[i])}{unit}</title></rect>"
            )
            if stacked:
                base = y
        if i % every == 0:
            out.append(
                f'<text x="{x + bar / 2:.1f}" y="{top_pad + plot_h + 14}" text-anchor="middle">'
                f"{html.escape(label)}</text>"
            )
    lx = left
    for name, _, colour in series:
        out.append(
            f'<rect x="{lx}" y="{height - 12}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{lx + 14}" y="{height - 3}">{html.escape(name)}</text>'
        )
        lx += 24 + 7 * len(name)
    out.append("</svg>")
    return "\n".join(out)


def _num(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.2f}"
