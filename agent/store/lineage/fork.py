"""Forking a run: a new run directory that shares units 1..N with the original.

The source database is copied with SQLite's online backup from a read-only connection (a
consistent snapshot even while the source is being written; the source is never touched),
then everything after unit N is removed from the copy in one transaction: chapters with
their versions and search windows, Magnet steps with their paragraphs, states, and the
ledger rows of later units. Judgments are dropped (they judged the whole original story).
The copy is left ``stopped`` at unit N with the given configuration, so resuming it
continues from N+1; where it came from is kept in its plan under ``forked_from``.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any

from agent.store.config import canonical_json, fingerprint
from agent.store.db import atomic, connect
from agent.store.errors import StoreError
from agent.store.paths import DB_NAME, new_run_dir, outside_run
from agent.store.runstore import RunStore

FORK_KEY = "forked_from"
STALE_KEY = "stale_after"
"""Plan key set by an edit: units after this one were written from the text before the edit."""


def fork_run(source: RunStore, out: str | Path, *, at: int, config: dict[str, Any] | None = None) -> RunStore:
    """Create the fork in ``out`` (refused if it holds a run); returns it open for writing."""
    info = source.info()
    if at < 0 or at > info.last_unit:
        raise StoreError(f"--at must be between 0 and {info.last_unit} (the last committed {info.unit_kind}), not {at}")
    wanted = outside_run(source.run_dir, out, what="the fork")
    existed = wanted.exists()
    target = new_run_dir(out)
    db = target / DB_NAME
    conn = None
    try:
        src = connect(source.path, readonly=True)
        dst = sqlite3.connect(str(db))
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()
        conn = connect(db)
        with atomic(conn):
            _truncate(conn, at)
            now = time.time()
            new_config = info.config if config is None else config
            conn.execute(
                "UPDATE run SET last_unit = ?, status = 'stopped', error = NULL, finished_at = NULL, "
                "config = ?, fingerprint = ?, created_at = ?, updated_at = ? WHERE id = 1",
                (at, canonical_json(new_config), fingerprint(new_config), now, now),
            )
            conn.execute(
                "UPDATE sessions SET ended_at = coalesce(ended_at, last_at), "
                "outcome = coalesce(outcome, 'copied by fork')"
            )
            record = {
                "run": str(source.run_dir),
                "at": at,
                "unit_kind": info.unit_kind,
                "fingerprint": info.fingerprint,
                "forked_at": now,
            }
            conn.execute(
                "INSERT INTO plan (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE "
                "SET value = excluded.value, updated_at = excluded.updated_at",
                (FORK_KEY, canonical_json(record), now),
            )
            conn.execute("DELETE FROM plan WHERE key = ?", (STALE_KEY,))
        conn.execute("VACUUM")  # the removed units' text does not linger in free pages
    except BaseException:  # a full disk, a kill: no half-made fork is left (the source is only read)
        if conn is not None:
            conn.close()
        for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", f"{DB_NAME}-journal"):
            (target / name).unlink(missing_ok=True)
        if not existed:
            with contextlib.suppress(OSError):
                target.rmdir()
        raise
    conn.close()
    return RunStore.open(target)


def _truncate(conn: sqlite3.Connection, at: int) -> None:
    conn.execute("DELETE FROM chapter_windows WHERE chapter > ?", (at,))  # fires the FTS delete trigger
    conn.execute("DELETE FROM chapter_versions WHERE idx > ?", (at,))
    conn.execute("DELETE FROM chapters WHERE idx > ?", (at,))
    conn.execute("DELETE FROM paragraph_versions WHERE step > ?", (at,))
    conn.execute("DELETE FROM paragraphs WHERE step > ?", (at,))
    conn.execute("DELETE FROM steps WHERE step > ?", (at,))
    conn.execute("DELETE FROM states WHERE unit > ?", (at,))
    conn.execute("DELETE FROM llm_calls WHERE unit > ?", (at,))
    conn.execute("DELETE FROM tool_calls WHERE unit > ?", (at,))
    conn.execute("DELETE FROM judgments")
    conn.execute(
        "DELETE FROM llm_messages WHERE hash NOT IN (SELECT value FROM llm_calls, json_each(llm_calls.messages))"
    )
