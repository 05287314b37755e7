"""Plain-SVG plots for reports (no plotting dependency: matplotlib is not installed here).

One function: labelled series of (x, y) points drawn as markers (and lines, for per-chapter
series) on linear axes with ticks, a title and a legend. SVG renders in any browser and in
Markdown viewers, and needs nothing beyond the standard library to write.
"""

from __future__ import annotations

from html import escape

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
W, H, LEFT, RIGHT, TOP, BOTTOM = 640, 400, 70, 170, 40, 50


def _ticks(low: float, high: float, n: int = 5) -> list[float]:
    if high == low:
        return [low]
    step = (high - low) / (n - 1)
    return [low + i * step for i in range(n)]


def _fmt(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}".rstrip("0").rstrip(".") if v else "0"


def svg_plot(series: dict[str, list[tuple[float, float]]], *, title: str, xlabel: str, ylabel: str,
             lines: bool = False) -> str:
    points = [p for pts in series.values() for p in pts]
    if not points:
        return ""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(0.0, min(ys)), max(ys)
    if x0 == x1:
        x0, x1 = x0 - 1, x1 + 1
    if y0 == y1:
        y1 = y0 + 1
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return TOP + ph - (y - y0) / (y1 - y0) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
           f'font-size="11">', f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
           f'<line x1="{LEFT}" y1="{TOP + ph}" x2="{LEFT + pw}" y2="{TOP + ph}" stroke="black"/>',
           f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + ph}" stroke="black"/>']
    for t in _ticks(x0, x1):
        out.append(f'<text x="{sx(t):.1f}" y="{TOP + ph + 15}" text-anchor="middle">{_fmt(t)}</text>')
    for t in _ticks(y0, y1):
        out.append(f'<text x="{LEFT - 5}" y="{sy(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
        out.append(f'<line x1="{LEFT}" y1="{sy(t):.1f}" x2="{LEFT + pw}" y2="{sy(t):.1f}" stroke="#ddd"/>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{H - 10}" text-anchor="middle">{escape(xlabel)}</text>')
    out.append(f'<text x="15" y="{TOP + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 15 {TOP + ph / 2})">{escape(ylabel)}</text>')
    for n, (label, pts) in enumerate(series.items()):
        colour = COLOURS[n % len(COLOURS)]
        pts = sorted(pts)
        if lines and len(pts) > 1:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        out += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{colour}"/>' for x, y in pts]
        ly = TOP + 10 + 16 * n
        out.append(f'<rect x="{W - RIGHT + 12}" y="{ly - 8}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{W - RIGHT + 26}" y="{ly + 1}">{escape(label[:24])}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
