"""Magnet's units: one timestep (its actions, critique and selection) and the paragraphs it adds."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from agent.store.errors import CommitError
from agent.store.records import Paragraph, stored_text
from agent.text import count_words

ParagraphSpec = str | tuple[str, str]
"""A paragraph as text (a narration) or ``(kind, text)``, e.g. ``("transition", ...)``."""


def insert_step(
    conn: sqlite3.Connection,
    step: int,
    paragraphs: Sequence[ParagraphSpec],
    *,
    goal: str | None,
    record: dict[str, Any],
) -> list[Paragraph]:
    try:
        conn.execute(
            "INSERT INTO steps (step, goal, record, created_at) VALUES (?, ?, ?, ?)",
            (step, goal, json.dumps(record, ensure_ascii=False), time.time()),
        )
    except sqlite3.IntegrityError as exc:
        raise CommitError(f"step {step} is already committed") from exc
    out = []
    for seq, spec in enumerate(paragraphs):
        kind, text = ("narration", spec) if isinstance(spec, str) else spec
        paragraph = Paragraph(step, seq, kind, text, count_words(text))
        conn.execute(
            "INSERT INTO paragraphs (step, seq, kind, text, words) VALUES (?, ?, ?, ?, ?)",
            (step, seq, kind, text, paragraph.words),
        )
        out.append(paragraph)
    return out


def revise_paragraph(conn: sqlite3.Connection, step: int, seq: int, text: str, *, reason: str) -> Paragraph:
    """Replace one paragraph's text, keeping the replaced text as its next numbered version."""
    row = conn.execute("SELECT kind, text, words FROM paragraphs WHERE step = ? AND seq = ?", (step, seq)).fetchone()
    if row is None:
        raise CommitError(f"paragraph {seq} of step {step} does not exist")
    version = conn.execute(
        "SELECT COALESCE(MAX(version), 0) + 1 FROM paragraph_versions WHERE step = ? AND seq = ?", (step, seq)
    ).fetchone()[0]
    conn.execute(
        "INSERT INTO paragraph_versions (step, seq, version, text, words, replaced_by, replaced_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (step, seq, version, row[1], row[2], reason, time.time()),
    )
    paragraph = Paragraph(step, seq, row[0], text, count_words(text))
    conn.execute(
        "UPDATE paragraphs SET text = ?, words = ? WHERE step = ? AND seq = ?", (text, paragraph.words, step, seq)
    )
    return paragraph


def paragraph_versions(conn: sqlite3.Connection, step: int, seq: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT version, text, words, replaced_by, replaced_at FROM paragraph_versions "
        "WHERE step = ? AND seq = ? ORDER BY version",
        (step, seq),
    )
    return [{"version": r[0], "text": r[1], "words": r[2], "replaced_by": r[3], "replaced_at": r[4]} for r in rows]


def all_paragraphs(conn: sqlite3.Connection) -> list[Paragraph]:
    rows = conn.execute("SELECT step, seq, kind, text, words FROM paragraphs ORDER BY step, seq")
    return [Paragraph(r[0], r[1], r[2], stored_text(r[3]), r[4]) for r in rows]


def steps(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT step, goal, record, created_at FROM steps ORDER BY step")
    return [{"step": r[0], "goal": r[1], "record": json.loads(r[2]), "created_at": r[3]} for r in rows]


def search_paragraphs(conn: sqlite3.Connection, query: str, *, k: int, before_step: int) -> list[Paragraph]:
    """The ``k`` paragraphs of steps before ``before_step`` that best match ``query`` (BM25 over
    the FTS5 index that commits keep up to date); the query is an OR of quoted terms, so no
    user or model text reaches FTS5's query syntax."""
    from agent.store.search import match_expression, query_terms

    terms = query_terms(query)
    if not terms or k <= 0:
        return []
    rows = conn.execute(
        "SELECT p.step, p.seq, p.kind, p.text, p.words FROM paragraph_fts f JOIN paragraphs p ON p.rowid = f.rowid "
        "WHERE paragraph_fts MATCH ? AND p.step < ? ORDER BY bm25(paragraph_fts), p.step, p.seq LIMIT ?",
        (match_expression(terms), before_step, k),
    ).fetchall()
    return [Paragraph(r[0], r[1], r[2], stored_text(r[3]), r[4]) for r in rows]
