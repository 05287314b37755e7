"""The world graph drawn so that every label can be read: one card for the world and one per
character, each listing its variables (secrets marked, collapsed beyond a count), laid out in a
grid, and a card of relations showing each pair once with the label of each direction.

A radial drawing put two-way relation labels at one midpoint and let variable labels collide;
here nothing is placed where something else is: cards are stacked in rows whose height is the
tallest card's, and every line of text is cut to its card's width, measured with conservative
glyph widths (wider than the fonts a browser substitutes for Helvetica), so none is clipped.
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from typing import Any

WIDTH = 960
"""The width of the main column of the view, so that the graph is drawn there at its own size."""
PAD = 16
GAP = 16
FONT = 12
ROW = 18
HEAD = 24
INSET = 10
COLUMNS = 2
MAX_ROWS = 14
"""Variables listed per card; beyond it the rest are counted ("+ 12 more")."""
COLORS = {"world": "#fdf2c4", "character": "#e3f0fa", "relations": "#fbe9e7"}


def glyph_em(ch: str) -> float:
    """An upper bound of a glyph's advance in em for the sans fonts a browser may use."""
    if unicodedata.east_asian_width(ch) in ("W", "F"):
        return 1.05
    if ch == " ":
        return 0.34
    if ch in "il.,:;'|!()[]{}`":
        return 0.42
    if ch.isdigit() or ch.islower():
        return 0.66
    if ch in "mw":
        return 0.98
    return 0.9 if ch in "MW@%" else 0.78


def text_width(text: str, size: float = FONT) -> float:
    return sum(glyph_em(c) for c in text) * size


def fit(text: str, width: float, size: float = FONT) -> str:
    """``text`` on one line, cut with an ellipsis so that it is at most ``width`` wide."""
    text = " ".join(str(text).split())
    if text_width(text, size) <= width:
        return text
    room = width - text_width("…", size)
    out = []
    for ch in text:
        room -= glyph_em(ch) * size
        if room < 0:
            break
        out.append(ch)
    return "".join(out).rstrip() + "…"


def _natural(text: str) -> list[Any]:
    """``var 2`` before ``var 10``."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part]


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def cards(graph: dict[str, Any]) -> list[dict[str, Any]]:
    """The cards to draw: kind, id, title and lines ``(text, style)``; style is ``var``, ``secret``,
    ``more``, ``pair`` or ``rel``."""
    nodes = graph["nodes"]
    owner_of = {e["from"]: e["to"] for e in graph["edges"] if e["kind"] == "concerns"}
    by_id = {n["id"]: n for n in nodes}
    out: list[dict[str, Any]] = []
    for node in nodes:
        if node["kind"] not in ("world", "character"):
            continue
        variables = sorted(
            (by_id[v] for v, owner in owner_of.items() if owner == node["id"] and v in by_id),
            key=lambda v: _natural(str(v.get("attribute") or v["label"])),
        )
        lines: list[tuple[str, str]] = []
        for var in variables[:MAX_ROWS] if len(variables) <= MAX_ROWS else variables[: MAX_ROWS - 1]:
            attribute = str(var.get("attribute") or var["label"])
            style = "secret" if var.get("secret") else "var"
            lines.append(
                ((f"secret · {attribute}" if style == "secret" else attribute) + " = " + _value(var["value"]), style)
            )
        if len(variables) > MAX_ROWS:
            lines.append((f"+ {len(variables) - MAX_ROWS + 1} more (the view's cast page lists all)", "more"))
        title = node["label"] + (f" · {node['role']}" if node.get("role") else "")
        out.append(
            {"kind": node["kind"], "id": node["id"], "title": title, "lines": lines or [("no variables", "more")]}
        )
    relations = _relations(graph, by_id)
    if relations:
        out.append({"kind": "relations", "id": "relations", "title": "Relations", "lines": relations})
    return out


def _relations(graph: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """Each related pair once: ``A ↔ B`` (or ``A → B``) and the label of each direction under it."""
    labels: dict[tuple[str, str], str] = {}
    for e in graph["edges"]:
        if e["kind"] == "relationship":
            labels[(e["from"], e["to"])] = str(e.get("label", ""))
    name = {k: str(v["label"]) for k, v in by_id.items()}
    lines: list[tuple[str, str]] = []
    done: set[frozenset[str]] = set()
    for a, b in labels:
        pair = frozenset((a, b))
        if pair in done:
            continue
        done.add(pair)
        back = labels.get((b, a))
        lines.append((f"{name.get(a, a)} {'↔' if back is not None else '→'} {name.get(b, b)}", "pair"))
        lines.append((f"{name.get(a, a)} to {name.get(b, b)}: {labels[(a, b)]}", "rel"))
        if back is not None:
            lines.append((f"{name.get(b, b)} to {name.get(a, a)}: {back}", "rel"))
    return lines


def layout_svg(graph: dict[str, Any]) -> str:
    """The cards in a grid, two to a row, as SVG (every text escaped; nothing fetched)."""
    items = cards(graph)
    cols = max(1, min(COLUMNS, len(items)))
    card_w = (WIDTH - 2 * PAD - (cols - 1) * GAP) / cols
    text_room = card_w - 2 * INSET
    body: list[str] = []
    y = PAD
    for start in range(0, len(items), cols):
        row = items[start : start + cols]
        height = max(HEAD + INSET + ROW * len(c["lines"]) for c in row) + INSET
        for i, card in enumerate(row):
            x = PAD + i * (card_w + GAP)
            body.append(f'<g class="card card-{card["kind"]}" data-id="{html.escape(card["id"])}">')
            body.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{card_w:.1f}" height="{height:.1f}" rx="6" '
                f'fill="{COLORS[card["kind"]]}" stroke="#78909c"/>'
            )
            body.append(
                f'<text x="{x + INSET:.1f}" y="{y + HEAD - 6:.1f}" font-weight="bold" font-size="{FONT + 1}">'
                f"{html.escape(fit(card['title'], text_room, FONT + 1))}</text>"
            )
            for n, (text, style) in enumerate(card["lines"]):
                ty = y + HEAD + INSET + ROW * n + FONT - 2
                indent = 12 if style == "rel" else 0
                attrs = {
                    "var": 'fill="#1f3a4d"',
                    "secret": 'fill="#6a1b9a" font-style="italic"',
                    "more": 'fill="#757575" font-style="italic"',
                    "pair": 'fill="#b71c1c" font-weight="bold"',
                    "rel": 'fill="#4e342e"',
                }[style]
                body.append(
                    f'<text x="{x + INSET + indent:.1f}" y="{ty:.1f}" {attrs}>'
                    f"{html.escape(fit(text, text_room - indent))}</text>"
                )
            body.append("</g>")
        y += height + GAP
    total = y - GAP + PAD
    return (
        "\n".join(
            [
                f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{total:.0f}" '
                f'viewBox="0 0 {WIDTH} {total:.0f}" font-family="Helvetica, Arial, sans-serif" '
                f'font-size="{FONT}" role="img" aria-label="the world graph">',
                '<rect width="100%" height="100%" fill="white"/>',
                *body,
                "</svg>",
            ]
        )
        + "\n"
    )
