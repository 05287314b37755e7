"""``RunDb``: the one connection of an open run, shared by the store's parts.

The connection is shared by every thread of the process behind one lock (the LLM layer records
calls from several threads at once); the parts hold this object, never a copy of its fields.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from agent.store.config import canonical_json
from agent.store.db import atomic
from agent.store.errors import NotARunError, StoreError
from agent.store.paths import DB_NAME
from agent.store.records import RunInfo


class RunDb:
    """The run directory, its database connection and lock, and the session and unit work is filed under."""

    def __init__(self, run_dir: Path, conn: sqlite3.Connection, *, readonly: bool) -> None:
        self.run_dir = run_dir
        self.path = run_dir / DB_NAME
        self.readonly = readonly
        self.conn = conn
        self.lock = threading.RLock()
        self.session_id: int | None = None
        """The open writing session (:class:`agent.store.run_parts.Sessions`), or None."""
        self.unit_in_flight: int | None = None
        """Unit that ledger rows are filed under; ``None`` means the next uncommitted unit.
        A pipeline sets ``0`` while it plans, before the first unit."""

    def info(self) -> RunInfo:
        rows = self.read("SELECT * FROM run WHERE id = 1")
        if not rows:
            raise NotARunError(f"{self.path} has no run record")
        return RunInfo.from_row(rows[0])

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One transaction under the lock; refused on a read-only open."""
        if self.readonly:
            raise StoreError(f"{self.run_dir} is open read-only")
        with self.lock, atomic(self.conn) as conn:
            yield conn

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self.lock:
            return self.conn.execute(sql, params).fetchall()

    def unit(self, conn: sqlite3.Connection) -> int:
        """The unit work is filed under now: the one in flight, else the next uncommitted one."""
        if self.unit_in_flight is not None:
            return self.unit_in_flight
        return int(conn.execute("SELECT last_unit FROM run WHERE id = 1").fetchone()[0]) + 1

    def checkpoint(self, mode: str = "PASSIVE") -> None:
        """Copy the write-ahead log into ``run.db`` so that the file alone holds every committed
        unit (a user who copies only ``run.db`` after a kill -9 loses nothing committed)."""
        with suppress(sqlite3.Error):
            self.conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()


def to_json(value: Any, what: str) -> str:
    """``value`` as the store's canonical JSON, or :class:`StoreError` naming ``what`` it is."""
    try:
        return canonical_json(value)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} must be JSON-serialisable: {exc}") from exc
