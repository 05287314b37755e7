"""The batch database (``DIR/batch.db``): which stories a batch writes and how each one went.

Each story's own run (``DIR/<story>/run.db``) stays the truth about its text; this database is
the batch's ledger: the stories and their configurations (so a resume needs no prompt file),
and per story its status, start and end, words, units, calls, tokens and last error. Rows are
refreshed from the story's run whenever it starts, commits a unit or stops, so ``fabula batch
show`` reads one file. Written from several threads (one connection behind a lock); a story
left ``running`` by a process that is gone reads as ``interrupted``.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from agent.batch.stories import StorySpec, target_words
from agent.errors import FabulaError, InputError
from agent.store.run_parts import pid_alive

DB_NAME = "batch.db"
SCHEMA_VERSION = 1
SCHEMA = [
    """CREATE TABLE batch (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        pipeline TEXT NOT NULL,
        llm TEXT NOT NULL,
        concurrency INTEGER NOT NULL,
        created_at REAL NOT NULL)""",
    """CREATE TABLE stories (
        key TEXT PRIMARY KEY,
        seq INTEGER NOT NULL UNIQUE,
        run_dir TEXT NOT NULL UNIQUE,
        config TEXT NOT NULL,
        target_words INTEGER NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        started_at REAL,
        ended_at REAL,
        words INTEGER NOT NULL DEFAULT 0,
        units INTEGER NOT NULL DEFAULT 0,
        target_units INTEGER,
        calls INTEGER NOT NULL DEFAULT 0,
        prompt_tokens INTEGER NOT NULL DEFAULT 0,
        cached_prompt_tokens INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        pid INTEGER,
        host TEXT)""",
]
STATUSES = ("pending", "running", "completed", "failed", "stopped")


class BatchError(FabulaError):
    """The batch database cannot be used (busy, damaged)."""


class NotABatchError(InputError):
    """The folder holds no batch (or already holds one, for a new batch)."""


@dataclass(frozen=True)
class StoryRow:
    """One story as the batch database records it."""

    key: str
    seq: int
    run_dir: str
    config: dict[str, Any]
    target_words: int
    status: str
    attempts: int
    started_at: float | None
    ended_at: float | None
    words: int
    units: int
    target_units: int | None
    calls: int
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int
    error: str | None
    pid: int | None
    host: str | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> StoryRow:
        values = {f.name: row[f.name] for f in fields(cls)}
        values["config"] = json.loads(values["config"])
        return cls(**values)

    @property
    def live_status(self) -> str:
        """The status, except that ``running`` in a process that is gone reads ``interrupted``."""
        if self.status == "running" and self.host == socket.gethostname() and not pid_alive(self.pid):
            return "interrupted"
        return self.status

    def summary(self) -> dict[str, Any]:
        """The row for ``batch show --json`` (without the configuration)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("config", "pid", "host")}
        out["status"] = self.live_status
        return out


@dataclass(frozen=True)
class Stats:
    """A story's figures read from its run."""

    words: int = 0
    units: int = 0
    target_units: int | None = None
    calls: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0


def is_batch(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / DB_NAME).is_file()


class BatchStore:
    """The batch database of one batch folder. Open with :meth:`create` or :meth:`open`."""

    def __init__(self, folder: Path, conn: sqlite3.Connection) -> None:
        self.folder = folder
        self._conn = conn
        self._lock = threading.Lock()

    @staticmethod
    def _connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
        uri = f"{path.as_uri()}?mode=ro" if readonly else str(path)
        conn = sqlite3.connect(uri, uri=readonly, isolation_level=None, check_same_thread=False, timeout=10.0)
        conn.row_factory = sqlite3.Row
        if not readonly:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    @classmethod
    def create(
        cls,
        folder: str | os.PathLike[str],
        *,
        pipeline: str,
        llm: dict[str, Any],
        concurrency: int,
        stories: Sequence[StorySpec],
    ) -> BatchStore:
        """A new batch in ``folder`` (made if missing); refused where a batch or a run already is."""
        root = Path(folder).expanduser().resolve()
        if root.exists() and not root.is_dir():
            raise NotABatchError(f"not a directory: {folder}")
        if (root / DB_NAME).exists():
            raise NotABatchError(f"{folder} already holds a batch; fabula batch resume {folder} continues it")
        if (root / "run.db").exists():
            raise NotABatchError(f"{folder} holds a run, not a batch")
        clashes = [s.run_dir for s in stories if (root / s.run_dir).exists()]
        if clashes:
            raise NotABatchError(f"{folder}/{clashes[0]} already exists; give an empty or new --out folder")
        root.mkdir(parents=True, exist_ok=True)
        conn = cls._connect(root / DB_NAME)
        try:
            conn.execute("BEGIN IMMEDIATE")
            for statement in SCHEMA:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute(
                "INSERT INTO batch (id, pipeline, llm, concurrency, created_at) VALUES (1, ?, ?, ?, ?)",
                (pipeline, json.dumps(llm), concurrency, time.time()),
            )
            conn.executemany(
                "INSERT INTO stories (key, seq, run_dir, config, target_words) VALUES (?, ?, ?, ?, ?)",
                [
                    (s.key, n, s.run_dir, json.dumps(s.config, ensure_ascii=False), target_words(s.config))
                    for n, s in enumerate(stories, 1)
                ],
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.close()
            (root / DB_NAME).unlink(missing_ok=True)
            raise
        return cls(root, conn)

    @classmethod
    def open(cls, folder: str | os.PathLike[str], *, readonly: bool = False) -> BatchStore:
        root = Path(folder).expanduser().resolve()
        db = root / DB_NAME
        if not db.is_file():
            raise NotABatchError(f"{folder} is not a fabula batch (no {DB_NAME} in it)")
        try:
            conn = cls._connect(db, readonly=readonly)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            conn.execute("SELECT pipeline FROM batch WHERE id = 1").fetchone()
        except sqlite3.DatabaseError as exc:
            raise BatchError(f"{db}: the batch database is damaged or unreadable ({exc})") from exc
        if version != SCHEMA_VERSION:
            conn.close()
            raise BatchError(f"{db}: batch schema {version} is not the one this fabula reads ({SCHEMA_VERSION})")
        return cls(root, conn)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> BatchStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    # -- reading ---------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        with self._lock:
            row = self._conn.execute("SELECT * FROM batch WHERE id = 1").fetchone()
        return {
            "pipeline": row["pipeline"],
            "llm": json.loads(row["llm"]),
            "concurrency": row["concurrency"],
            "created_at": row["created_at"],
        }

    def stories(self) -> list[StoryRow]:
        with self._lock:
            rows = self._conn.execute("SELECT * FROM stories ORDER BY seq").fetchall()
        return [StoryRow.from_row(r) for r in rows]

    def story(self, key: str) -> StoryRow:
        with self._lock:
            row = self._conn.execute("SELECT * FROM stories WHERE key = ?", (key,)).fetchone()
        return StoryRow.from_row(row)

    def run_path(self, story: StoryRow) -> Path:
        return self.folder / story.run_dir

    # -- writing ---------------------------------------------------------------------------
    def add_stories(self, stories: Sequence[StorySpec]) -> list[str]:
        """Grow the batch: the stories whose key it does not hold yet are added, pending (a grid
        that grows); returns their keys. A story it holds is left as it is."""
        with self._write() as conn:
            held = {row["key"] for row in conn.execute("SELECT key FROM stories")}
            taken = {row["run_dir"] for row in conn.execute("SELECT run_dir FROM stories")}
            seq = conn.execute("SELECT coalesce(max(seq), 0) FROM stories").fetchone()[0]
            new = [s for s in stories if s.key not in held]
            clashes = [s.run_dir for s in new if s.run_dir in taken or (self.folder / s.run_dir).exists()]
            if clashes:
                raise NotABatchError(f"{self.folder}/{clashes[0]} already exists; the batch cannot take that story")
            conn.executemany(
                "INSERT INTO stories (key, seq, run_dir, config, target_words) VALUES (?, ?, ?, ?, ?)",
                [
                    (s.key, seq + n, s.run_dir, json.dumps(s.config, ensure_ascii=False), target_words(s.config))
                    for n, s in enumerate(new, 1)
                ],
            )
        return [s.key for s in new]

    def set_concurrency(self, concurrency: int) -> None:
        with self._write() as conn:
            conn.execute("UPDATE batch SET concurrency = ? WHERE id = 1", (concurrency,))

    def mark_started(self, key: str) -> None:
        """The story is being written by this process (one more attempt)."""
        with self._write() as conn:
            conn.execute(
                "UPDATE stories SET status = 'running', attempts = attempts + 1, error = NULL, "
                "started_at = coalesce(started_at, ?), ended_at = NULL, pid = ?, host = ? WHERE key = ?",
                (time.time(), os.getpid(), socket.gethostname(), key),
            )

    def record_stats(self, key: str, stats: Stats) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE stories SET words = ?, units = ?, target_units = ?, calls = ?, prompt_tokens = ?, "
                "cached_prompt_tokens = ?, completion_tokens = ? WHERE key = ?",
                (
                    stats.words,
                    stats.units,
                    stats.target_units,
                    stats.calls,
                    stats.prompt_tokens,
                    stats.cached_prompt_tokens,
                    stats.completion_tokens,
                    key,
                ),
            )

    def mark_ended(self, key: str, status: str, *, error: str | None = None) -> None:
        """``status``: completed, failed or stopped (Ctrl-C); ``error`` one line."""
        if status not in STATUSES:
            raise ValueError(f"unknown story status {status!r}")
        with self._write() as conn:
            conn.execute(
                "UPDATE stories SET status = ?, error = ?, ended_at = ? WHERE key = ?",
                (status, error, time.time(), key),
            )
