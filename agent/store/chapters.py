"""Chapters: committed once in order, revised only with a kept version history."""

from __future__ import annotations

import sqlite3
import time

from agent.store import search
from agent.store.errors import CommitError
from agent.store.records import Chapter
from agent.text import count_words

_COLUMNS = "idx, title, text, words, version, degraded, degraded_reason"


def insert(
    conn: sqlite3.Connection, index: int, title: str, text: str, *, degraded: bool, degraded_reason: str | None
) -> Chapter:
    """Insert a new chapter, its first version and its search windows (inside a transaction)."""
    now = time.time()
    words = count_words(text)
    try:
        conn.execute(
            "INSERT INTO chapters (idx, title, text, words, version, degraded, degraded_reason, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?)",
            (index, title, text, words, int(degraded), degraded_reason, now, now),
        )
    except sqlite3.IntegrityError as exc:
        raise CommitError(f"chapter {index} is already committed") from exc
    conn.execute(
        "INSERT INTO chapter_versions (idx, version, title, text, words, reason, unit, created_at)"
        " VALUES (?, 1, ?, ?, ?, 'write', ?, ?)",
        (index, title, text, words, index, now),
    )
    search.index_chapter(conn, index, text)
    return Chapter(index, title, text, words, 1, degraded, degraded_reason)


def revise(
    conn: sqlite3.Connection, index: int, text: str, *, title: str | None, reason: str, unit: int | None
) -> Chapter:
    """Replace a committed chapter's text; keep the old version; reindex (inside a transaction)."""
    current = get(conn, index)
    if current is None:
        raise CommitError(f"chapter {index} does not exist")
    new_title = current.title if title is None else title
    words = count_words(text)
    version = current.version + 1
    now = time.time()
    conn.execute(
        "UPDATE chapters SET title = ?, text = ?, words = ?, version = ?, updated_at = ? WHERE idx = ?",
        (new_title, text, words, version, now, index),
    )
    conn.execute(
        "INSERT INTO chapter_versions (idx, version, title, text, words, reason, unit, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (index, version, new_title, text, words, reason, unit, now),
    )
    search.index_chapter(conn, index, text)
    return Chapter(index, new_title, text, words, version, current.degraded, current.degraded_reason)


def replace_span(text: str, old: str, new: str, *, index: int) -> str:
    """``text`` with the single exact occurrence of ``old`` replaced (the ``correct`` tool's rule)."""
    if not old:
        raise CommitError("the text to replace is empty")
    count = text.count(old)
    if count == 0:
        raise CommitError(f"the text to replace does not occur in chapter {index}")
    if count > 1:
        raise CommitError(f"the text to replace occurs {count} times in chapter {index}; quote more of it")
    return text.replace(old, new, 1)


def get(conn: sqlite3.Connection, index: int) -> Chapter | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM chapters WHERE idx = ?", (index,)).fetchone()
    return Chapter.from_row(row) if row else None


def all_chapters(conn: sqlite3.Connection) -> list[Chapter]:
    return [Chapter.from_row(r) for r in conn.execute(f"SELECT {_COLUMNS} FROM chapters ORDER BY idx")]


def versions(conn: sqlite3.Connection, index: int) -> list[dict[str, object]]:
    rows = conn.execute(
        "SELECT version, title, text, words, reason, unit, created_at FROM chapter_versions "
        "WHERE idx = ? ORDER BY version",
        (index,),
    )
    return [dict(r) for r in rows]
