"""The SQLite connection: WAL, foreign keys, and ``atomic()`` transactions.

Connections run in autocommit mode (``isolation_level=None``) so that every transaction is
explicit: ``atomic()`` opens ``BEGIN IMMEDIATE`` (the write lock is taken up front, so a
transaction never fails half-way for lock upgrade reasons) or, nested, a savepoint.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent.store.errors import NotARunError

SQLITE_MAGIC = b"SQLite format 3\x00"
APPLICATION_ID = 0x66616231  # "fab1": marks a database as a fabula run


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """Open ``path``; read-only connections can never modify the file."""
    if readonly:
        conn = sqlite3.connect(
            f"{path.as_uri()}?mode=ro", uri=True, isolation_level=None, check_same_thread=False, timeout=10.0
        )
        if not os.access(path.parent, os.W_OK) and not _wal_present(path):
            # a read-only folder (a mounted archive): SQLite cannot create the -shm file a WAL
            # database needs, so the file is read as immutable; every committed unit is in it
            # because fabula checkpoints after each commit and at close
            conn.close()
            conn = sqlite3.connect(
                f"{path.as_uri()}?mode=ro&immutable=1",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=10.0,
            )
    else:
        conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=10.0)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA busy_timeout = 10000")
    if not readonly:
        if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
            conn.close()
            raise NotARunError(f"{path}: cannot switch the database to WAL mode")
        # FULL: a committed unit survives a power cut too, at one fsync per commit (a chapter
        # takes minutes to write; the fsync takes milliseconds).
        conn.execute("PRAGMA synchronous = FULL")
    return conn


def _wal_present(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    return wal.exists() and wal.stat().st_size > 0


def looks_like_sqlite(path: Path) -> bool:
    """Check the file header without opening it with SQLite (which could create files)."""
    try:
        with path.open("rb") as handle:
            return handle.read(16) == SQLITE_MAGIC
    except OSError:
        return False


@contextmanager
def atomic(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """All statements inside commit together or not at all; nests via savepoints."""
    if conn.in_transaction:
        name = f"sp_{uuid.uuid4().hex}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield conn
        except BaseException:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
            raise
        conn.execute(f"RELEASE {name}")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
