"""Judgments linked to the story: the quotes a judge gave, found in the stored text.

A consistency instance quotes two passages (``exact_quote`` in ``quote_chapter`` and
``contradicting_quote`` in ``contradicting_chapter``); an editorial note quotes one
(``quote``). Each quote is looked up in the hinted chapter first, then everywhere, tolerating
whitespace differences; a quote that does not occur is shown as such (never linked to a guess).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agent.store.export.book import Section
from agent.store.judgments import Judgment


@dataclass(frozen=True)
class Place:
    """Where a quote occurs: section (chapter/step) index, paragraph number, character span."""

    section: int
    paragraph: int
    start: int
    end: int


@dataclass
class Quote:
    anchor: str
    text: str
    hint: int | None
    place: Place | None


@dataclass
class Finding:
    """One instance or note of a judgment: its label, explanation and quotes."""

    label: str
    note: str
    quotes: list[Quote] = field(default_factory=list)


@dataclass
class JudgmentView:
    judgment: Judgment
    findings: list[Finding]
    extra: dict[str, Any]


def pattern(quote: str) -> re.Pattern[str] | None:
    words = quote.split()
    if not words:
        return None
    return re.compile(r"\s+".join(re.escape(w) for w in words))


def locate(quote: str, sections: list[Section], hint: int | None) -> Place | None:
    regex = pattern(quote)
    if regex is None:
        return None
    ordered = sorted(sections, key=lambda s: s.index != hint)
    for section in ordered:
        for number, paragraph in enumerate(section.paragraphs):
            match = regex.search(paragraph)
            if match:
                return Place(section.index, number, match.start(), match.end())
    return None


def _hint(item: dict[str, Any], key: str) -> int | None:
    value = item.get("quote_chapter") if key == "exact_quote" else item.get(key.removesuffix("quote") + "chapter")
    return value if isinstance(value, int) else None


def findings(reply: Any, sections: list[Section], prefix: str) -> list[Finding]:
    """Every dict in ``reply`` that quotes the story, in reply order."""
    out: list[Finding] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            keys = sorted(
                (k for k, v in node.items() if (k == "quote" or k.endswith("_quote")) and isinstance(v, str)),
                key=lambda k: (k != "exact_quote", k),
            )  # the earlier passage first
            if keys:
                label = str(node.get("subtype") or node.get("category") or node.get("name") or "note")
                note = str(node.get("explanation") or node.get("note") or node.get("reason") or "")
                finding = Finding(label, note)
                for key in keys:
                    text = node[key]
                    if not text.strip():
                        continue
                    anchor = f"{prefix}-{len(out)}-{len(finding.quotes)}"
                    hint = _hint(node, key)
                    finding.quotes.append(Quote(anchor, text, hint, locate(text, sections, hint)))
                out.append(finding)
            for value in node.values():
                if isinstance(value, dict | list):
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(reply)
    return out


def judgment_views(judged: list[Judgment], sections: list[Section]) -> list[JudgmentView]:
    out = []
    for n, j in enumerate(judged):
        found = findings(j.reply, sections, f"q{n}") if j.ok else []
        extra = (
            {k: v for k, v in j.reply.items() if isinstance(v, int | float | str) and not isinstance(v, bool)}
            if j.ok and isinstance(j.reply, dict)
            else {}
        )
        out.append(JudgmentView(j, found, extra))
    return out


def marks(views: list[JudgmentView]) -> dict[tuple[int, int], list[tuple[int, int, str, str]]]:
    """``(section, paragraph) -> [(start, end, anchor, label)]``: where the story page marks quotes."""
    out: dict[tuple[int, int], list[tuple[int, int, str, str]]] = {}
    for view in views:
        for finding in view.findings:
            for quote in finding.quotes:
                if quote.place is not None:
                    p = quote.place
                    out.setdefault((p.section, p.paragraph), []).append(
                        (p.start, p.end, quote.anchor, f"{view.judgment.kind}: {finding.label}")
                    )
    return out
