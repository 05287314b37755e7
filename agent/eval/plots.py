"""PNG plots for reports and benchmarks, drawn with matplotlib's Agg canvas.

One function: labelled series of (x, y) points drawn as markers (and lines, for per-chapter
series) with a title, axis labels, a grid and a legend, returned as PNG bytes. The
object-oriented API (``Figure`` + ``FigureCanvasAgg``) is used instead of ``pyplot`` so no
GUI backend or global figure state is touched, and the PNG carries no timestamp, so
regenerating a report from the same numbers gives the same bytes.
"""

from __future__ import annotations

import io

MISSING = "matplotlib is not installed: run scripts/setup, or pip install -e '.[eval]' in the fabula checkout"


def plots_available() -> bool:
    """Whether PNG plots can be drawn here (matplotlib is an optional extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def png_plot(
    series: dict[str, list[tuple[float, float]]], *, title: str, xlabel: str, ylabel: str, lines: bool = False
) -> bytes:
    """The plot as PNG bytes, or ``b""`` when no series has a point; raises ImportError without matplotlib."""
    if not any(series.values()):
        return b""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.2, 4.2), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for label, points in series.items():
        if not points:
            continue
        xs, ys = zip(*sorted(points), strict=True)
        axes.plot(xs, ys, marker="o", markersize=4, linestyle="-" if lines else "none", label=label[:32])
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_ylim(bottom=min(0.0, axes.get_ylim()[0]))
    axes.grid(True, color="#dddddd")
    axes.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small", frameon=False)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()
