"""Per-chapter style distance of a run written with ``--style``: what ``fabula show`` prints."""

from __future__ import annotations

from typing import Any

from agent.style.guide import chapter_distance


def chapter_distances(guide: dict[str, Any] | None, chapters: list[Any]) -> list[dict[str, Any]]:
    """``[{chapter, words, features, total, drifted, farthest}]`` for each chapter (empty without a guide)."""
    if not guide:
        return []
    return [{"chapter": c.index, **chapter_distance(guide, c.text)} for c in chapters if c.text.strip()]


def style_lines(guide: dict[str, Any] | None, chapters: list[Any]) -> list[str]:
    """The lines ``fabula show`` prints: the sample, then each chapter's distance, drift flagged."""
    rows = chapter_distances(guide, chapters)
    if not guide:
        return []
    lines = [f"style     sample {guide['source']}; distance per chapter (Delta, lower is closer):"]
    for row in rows:
        flag = f"  DRIFT ({', '.join(row['farthest']) or 'function words'})" if row["drifted"] else ""
        lines.append(f"          chapter {row['chapter']}: {row['total']:.2f}{flag}")
    return lines
