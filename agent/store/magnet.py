"""Magnet's units: one timestep (its actions, critique and selection) and the paragraphs it adds."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from agent.store.errors import CommitError
from agent.store.records import Paragraph
from agent.text import count_words

ParagraphSpec = str | tuple[str, str]
"""A paragraph as text (a narration) or ``(kind, text)``, e.g. ``("transition", ...)``."""


def insert_step(conn: sqlite3.Connection, step: int, paragraphs: Sequence[ParagraphSpec], *, goal: str | None,
                record: dict[str, Any]) -> list[Paragraph]:
    try:
        conn.execute("INSERT INTO steps (step, goal, record, created_at) VALUES (?, ?, ?, ?)",
                     (step, goal, json.dumps(record, ensure_ascii=False), time.time()))
    except sqlite3.IntegrityError as exc:
        raise CommitError(f"step {step} is already committed") from exc
    out = []
    for seq, spec in enumerate(paragraphs):
        kind, text = ("narration", spec) if isinstance(spec, str) else spec
        paragraph = Paragraph(step, seq, kind, text, count_words(text))
        conn.execute("INSERT INTO paragraphs (step, seq, kind, text, words) VALUES (?, ?, ?, ?, ?)",
                     (step, seq, kind, text, paragraph.words))
        out.append(paragraph)
    return out


def all_paragraphs(conn: sqlite3.Connection) -> list[Paragraph]:
    rows = conn.execute("SELECT step, seq, kind, text, words FROM paragraphs ORDER BY step, seq")
    return [Paragraph(*r) for r in rows]


def steps(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT step, goal, record, created_at FROM steps ORDER BY step")
    return [{"step": r[0], "goal": r[1], "record": json.loads(r[2]), "created_at": r[3]} for r in rows]
