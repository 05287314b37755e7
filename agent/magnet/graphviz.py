"""The world graph laid out by Graphviz when it is installed (Debian's ``graphviz``: ``neato``).

The same cards as fabula's own layout (:func:`agent.magnet.graph_layout.cards`: the world and each
character with its variables, each relation pair once) become HTML-like table nodes that ``neato``
places without overlap (``overlap=vpsc``: each card moved least to clear the others) and joins by
their relations with splines routed around the cards; each card keeps the own layout's classes.
Graphviz measures every label with the fonts it will be drawn in (pango/fontconfig, the same fonts
a local browser resolves ``Helvetica`` to), so no label is clipped. Anything that goes wrong
(no binary, a crash, a timeout) returns None and the caller draws fabula's own layout.
``FABULA_GRAPH_LAYOUT=own`` (or ``graphviz``) forces a choice, for tests and comparisons.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from typing import Any

from agent.magnet.graph_layout import COLORS, cards, fit

ENGINE = "neato"
TEXT_WIDTH = 400
"""Longest line of a card in points; longer values are cut with an ellipsis, as in the own layout."""
TIMEOUT_S = 20
STYLES = {
    "var": '<FONT COLOR="#1f3a4d">{}</FONT>',
    "secret": '<FONT COLOR="#6a1b9a"><I>{}</I></FONT>',
    "more": '<FONT COLOR="#757575"><I>{}</I></FONT>',
    "pair": '<FONT COLOR="#b71c1c"><B>{}</B></FONT>',
    "rel": '<FONT COLOR="#4e342e">{}</FONT>',
}


def chosen() -> str:
    """``graphviz`` when it should be used (installed, not turned off), else ``own``."""
    wanted = os.environ.get("FABULA_GRAPH_LAYOUT", "").strip().lower()
    if wanted == "own":
        return "own"
    return "graphviz" if shutil.which(ENGINE) else "own"


def to_dot(graph: dict[str, Any]) -> str:
    """The cards as table nodes, and one edge per related pair (both ways: an arrow at each end)."""
    lines = [
        "graph world {",
        '  graph [overlap=vpsc, sep="+10", splines=true, pack=true, outputorder=edgesfirst, fontname="Helvetica"];',
        '  node [shape=plain, fontname="Helvetica", fontsize=12];',
        '  edge [color="#90a4ae", penwidth=1.4];',
    ]
    for n, card in enumerate(cards(graph)):
        rows = [f'<TR><TD ALIGN="LEFT"><B>{_esc(fit(card["title"], TEXT_WIDTH, 13))}</B></TD></TR>']
        rows += [
            f'<TR><TD ALIGN="LEFT">{STYLES[style].format(_esc(fit(text, TEXT_WIDTH)))}</TD></TR>'
            for text, style in card["lines"]
        ]
        table = (
            f'<TABLE BORDER="1" COLOR="#78909c" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" STYLE="rounded" '
            f'BGCOLOR="{COLORS[card["kind"]]}">{"".join(rows)}</TABLE>'
        )
        lines.append(f'  "{_id(card["id"])}" [label=<{table}>, id="card_{n}_{card["kind"]}"];')
    pairs = {frozenset((e["from"], e["to"])) for e in graph["edges"] if e["kind"] == "relationship"}
    for pair in sorted(pairs, key=sorted):
        a, b = sorted(pair) if len(pair) == 2 else (next(iter(pair)),) * 2
        lines.append(f'  "{_id(a)}" -- "{_id(b)}";')
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(graph: dict[str, Any]) -> str | None:
    """The graph as SVG by ``neato`` (without the XML prolog, to sit inside a page), or None."""
    binary = shutil.which(ENGINE)
    if binary is None:
        return None
    try:
        done = subprocess.run(
            [binary, "-Tsvg"], input=to_dot(graph), capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0 or "<svg" not in done.stdout:
        return None
    svg = done.stdout[done.stdout.index("<svg") :]
    # the own layout's classes on each card (Graphviz before 2.44 has no class attribute)
    svg = re.sub(r'<g id="card_(\d+)_([a-z]+)" class="node">', r'<g id="card_\1" class="node card card-\2">', svg)
    svg = svg.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "", 1)  # nothing links; one namespace
    return svg.replace("<svg ", '<svg role="img" aria-label="the world graph" class="graphviz" ', 1)


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _id(text: str) -> str:
    return re.sub(r'["\\]', lambda m: "\\" + m.group(0), text)
