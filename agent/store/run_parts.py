"""The parts of :class:`agent.store.runstore.RunStore` by job, each over the same connection:
the plumbing every part uses (:class:`StoreBase`), the sessions that hold a run for writing
(:class:`Sessions`), the plan (:class:`PlanRecords`), the readers of committed units
(:class:`UnitReaders`) and the ledgers of model and tool calls (:class:`Ledgers`).
``RunStore`` (opening, the run record, committing units) is all of them together.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from agent.llm.types import CallRecord
from agent.store import chapters as chapter_rows
from agent.store import ledger, magnet, search_ref
from agent.store import search as chapter_search
from agent.store.config import canonical_json, fingerprint
from agent.store.db import atomic
from agent.store.errors import NotARunError, RunBusyError, StoreError
from agent.store.paths import LOCK_NAME, inside
from agent.store.records import Chapter, Paragraph, RunInfo, ToolCall, stored_text
from agent.text import without_nul


class StoreBase:
    """What every part of the store shares: the run directory, the connection and its lock."""

    run_dir: Path
    path: Path
    readonly: bool
    _conn: sqlite3.Connection
    _lock: threading.RLock
    _session_id: int | None
    unit_in_flight: int | None

    def info(self) -> RunInfo:
        rows = self._read("SELECT * FROM run WHERE id = 1")
        if not rows:
            raise NotARunError(f"{self.path} has no run record")
        return RunInfo.from_row(rows[0])

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if self.readonly:
            raise StoreError(f"{self.run_dir} is open read-only")
        with self._lock, atomic(self._conn) as conn:
            yield conn

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()


class Sessions(StoreBase):
    """Holding a run for writing, one process at a time, and what each session recorded."""

    def live_status(self) -> str:
        """The stored status, except that a ``running`` run whose process is gone (killed,
        crashed, machine rebooted) reads as ``interrupted``, and a stopped run that waits for the
        writer (``--review``, ``agent.store.writer.review``) reads as ``review``."""
        status = self.info().status
        if status == "stopped" and self._read("SELECT 1 FROM plan WHERE key = 'in_review'"):
            return "review"
        if status != "running":
            return status
        rows = self._read("SELECT pid, host FROM sessions WHERE ended_at IS NULL ORDER BY id DESC LIMIT 1")
        if not rows:
            return "interrupted"
        pid, host = rows[0]
        if host == socket.gethostname() and not pid_alive(pid):
            return "interrupted"
        return "running"

    def last_transport(self) -> dict[str, Any] | None:
        """How the latest session that recorded one reached its model (backend, endpoint without
        credentials, model): where ``fabula resume`` finds the run's server again."""
        for (config,) in self._read("SELECT config FROM sessions ORDER BY id DESC"):
            try:
                transport = json.loads(config).get("transport")
            except (TypeError, ValueError, AttributeError):
                continue
            if isinstance(transport, dict):
                return transport
        return None

    @contextmanager
    def session(
        self,
        kind: str,
        *,
        config: dict[str, Any] | None = None,
        transport: dict[str, Any] | None = None,
        keep_status: bool = False,
    ) -> Iterator[int]:
        """Hold the run for writing while a pipeline works on it (``kind``: start, resume).

        Only one process at a time: a second one gets :class:`RunBusyError`. ``config``
        replaces the stored configuration (a forced resume); the old one stays in the
        previous sessions' rows. ``transport`` (backend, endpoint without credentials, model) is
        kept in this session's row: a server may move between sessions. The session's end sets
        the status: completed (if the pipeline called :meth:`finish`), stopped (returned early
        or Ctrl-C) or failed. ``keep_status``: work on committed units that does not advance the
        run (``fabula edit`` re-deriving a state) leaves the run's status as it found it.
        """
        lock = FileLock(str(inside(self.run_dir, LOCK_NAME)))
        try:
            lock.acquire(timeout=0)
        except Timeout as exc:
            raise RunBusyError(f"{self.run_dir} is being written by another process") from exc
        try:
            now = time.time()
            with self._write() as conn:
                if config is not None:
                    conn.execute(
                        "UPDATE run SET config = ?, fingerprint = ? WHERE id = 1",
                        (_json(config, "config"), fingerprint(config)),
                    )
                info = RunInfo.from_row(conn.execute("SELECT * FROM run").fetchone())
                kept = (info.status, info.error) if keep_status else None
                cursor = conn.execute(
                    "INSERT INTO sessions (kind, pid, host, config, fingerprint, started_at, last_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        kind,
                        os.getpid(),
                        socket.gethostname(),
                        canonical_json({**info.config, "transport": transport} if transport else info.config),
                        info.fingerprint,
                        now,
                        now,
                    ),
                )
                conn.execute(
                    "UPDATE run SET status = 'running', error = NULL, finished_at = NULL, updated_at = ? WHERE id = 1",
                    (now,),
                )
            self._session_id = int(cursor.lastrowid or 0)
            outcome, error = "stopped", None
            try:
                yield self._session_id
                outcome = "completed" if self.info().status == "completed" else "stopped"
            except KeyboardInterrupt:
                outcome = "interrupted"
                raise
            except BaseException as exc:
                outcome, error = "failed", (str(exc).splitlines() or [type(exc).__name__])[0]
                raise
            finally:
                self._end_session(outcome, error, kept)
        finally:
            lock.release()

    def _end_session(self, outcome: str, error: str | None, kept: tuple[str, str | None] | None = None) -> None:
        now = time.time()
        status = {"completed": "completed", "failed": "failed"}.get(outcome, "stopped")
        run_error = error
        if kept is not None:
            status, run_error = kept
        with suppress(sqlite3.Error), self._write() as conn:
            conn.execute(
                "UPDATE sessions SET ended_at = ?, last_at = ?, outcome = ? WHERE id = ?",
                (now, now, outcome, self._session_id),
            )
            conn.execute("UPDATE run SET status = ?, error = ?, updated_at = ? WHERE id = 1", (status, run_error, now))
        self._session_id = None


class PlanRecords(StoreBase):
    """The plan: named JSON parts (premise, outline, title, the server probe, ...)."""

    def put_plan(self, key: str, value: Any) -> None:
        """Store one part of the plan (premise, outline, ...) as JSON."""
        with self._write() as conn:
            conn.execute(
                "INSERT INTO plan (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE "
                "SET value = excluded.value, updated_at = excluded.updated_at",
                (key, _json(value, "plan"), time.time()),
            )

    def update_plan(self, values: dict[str, Any]) -> None:
        """Store several parts of the plan in one transaction (a writer's edit lands whole or not at all)."""
        rows = [(key, _json(value, "plan"), time.time()) for key, value in values.items()]
        with self._write() as conn:
            conn.executemany(
                "INSERT INTO plan (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE "
                "SET value = excluded.value, updated_at = excluded.updated_at",
                rows,
            )

    def record_server_probe(self, probe: dict[str, Any]) -> None:
        """Keep what the model server was found to be and enforce (the endpoint backend's probe,
        taken when a session opens the model), so a degraded run shows why."""
        self.put_plan("server_probe", probe)

    def server_probe(self) -> dict[str, Any] | None:
        return self.get_plan("server_probe")

    def plan(self) -> dict[str, Any]:
        return {r[0]: json.loads(r[1]) for r in self._read("SELECT key, value FROM plan ORDER BY key")}

    def delete_plan(self, key: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM plan WHERE key = ?", (key,))

    def get_plan(self, key: str, default: Any = None) -> Any:
        rows = self._read("SELECT value FROM plan WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else default


class UnitReaders(StoreBase):
    """Committed chapters, paragraphs, steps and states, and the two searches over them."""

    def chapter(self, index: int) -> Chapter | None:
        with self._lock:
            return chapter_rows.get(self._conn, index)

    def chapters(self) -> list[Chapter]:
        with self._lock:
            return chapter_rows.all_chapters(self._conn)

    def chapter_versions(self, index: int) -> list[dict[str, Any]]:
        with self._lock:
            return chapter_rows.versions(self._conn, index)

    def paragraphs(self) -> list[Paragraph]:
        with self._lock:
            return magnet.all_paragraphs(self._conn)

    def revise_paragraph(self, step: int, seq: int, text: str, *, reason: str) -> Paragraph:
        """Replace a committed Magnet paragraph's text (the old text is kept as a version)."""
        with self._write() as conn:
            return magnet.revise_paragraph(conn, step, seq, without_nul(text), reason=reason)

    def paragraph_versions(self, step: int, seq: int) -> list[dict[str, Any]]:
        with self._lock:
            return magnet.paragraph_versions(self._conn, step, seq)

    def steps(self) -> list[dict[str, Any]]:
        with self._lock:
            return magnet.steps(self._conn)

    _reference_index: search_ref.ReferenceIndex | None = None

    def search(
        self,
        query: str,
        *,
        k: int = chapter_search.DEFAULT_K,
        before: int | None = None,
        style: search_ref.SearchStyle = "fabula",
    ) -> list[chapter_search.Hit]:
        """The writer's search: the ``k`` best sentence windows, from chapters below ``before``; ``style``
        "reference": as the NstAgent reference code ranks them (:meth:`reference_search`)."""
        if style == "reference":
            return self.reference_search(query, k=k, before=before)
        with self._lock:
            return chapter_search.search(self._conn, query, k=k, before=before)

    def reference_search(
        self,
        query: str,
        *,
        k: int = chapter_search.DEFAULT_K,
        before: int | None = None,
        earlier: Sequence[tuple[int, int, str]] = (),
    ) -> list[chapter_search.Hit]:
        """The reference's search (agent.store.search_ref) over the chapters below ``before`` and ``earlier``'s
        ``(book, chapter, text)`` (a series' earlier books), in one in-memory index kept for this store."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT idx, text FROM chapters WHERE idx < ?", (1 << 62 if before is None else before,)
            )
            texts = {(search_ref.THIS_BOOK, int(i)): stored_text(t, "a chapter's text") for i, t in rows}
            texts.update({(book, chapter): text for book, chapter, text in earlier})
            if self._reference_index is None:
                self._reference_index = search_ref.ReferenceIndex()
            self._reference_index.sync(texts)
            return self._reference_index.search(query, k)

    def reader_search(
        self, query: str, *, k: int = chapter_search.DEFAULT_K, before: int | None = None
    ) -> list[chapter_search.Hit]:
        """A writer's search: quoted phrases as written, no sentence twice (agent.store.search)."""
        with self._lock:
            return chapter_search.reader_search(self._conn, query, k=k, before=before)

    def search_paragraphs(self, query: str, *, k: int, before_step: int) -> list[Paragraph]:
        """Magnet's long-range memory: the ``k`` best-matching paragraphs of earlier steps (BM25)."""
        with self._lock:
            return magnet.search_paragraphs(self._conn, query, k=k, before_step=before_step)

    def state(self, unit: int | None = None) -> Any:
        """The state after ``unit`` (default: the latest); ``None`` if there is none."""
        if unit is None:
            rows = self._read("SELECT state FROM states ORDER BY unit DESC LIMIT 1")
        else:
            rows = self._read("SELECT state FROM states WHERE unit = ?", (unit,))
        return json.loads(rows[0][0]) if rows else None


class Ledgers(StoreBase):
    """Every model call and tool call, filed under the unit in flight."""

    def _unit(self, conn: sqlite3.Connection) -> int:
        if self.unit_in_flight is not None:
            return self.unit_in_flight
        return int(conn.execute("SELECT last_unit FROM run WHERE id = 1").fetchone()[0]) + 1

    def record_llm_call(self, record: CallRecord) -> None:
        """The LLM layer's recorder: ``llm.recorders.append(store.record_llm_call)``. Thread-safe."""
        with self._write() as conn:
            ledger.insert_llm_call(conn, record, session_id=self._session_id, unit=self._unit(conn))

    @property
    def recorder(self) -> Callable[[CallRecord], None]:
        return self.record_llm_call

    def record_tool_call(
        self,
        *,
        turn: int,
        tool: str,
        arguments: Any,
        result: str | None = None,
        ok: bool = True,
        error: str | None = None,
        unit: int | None = None,
    ) -> None:
        """Record one tool call of the unit in flight (or of ``unit``)."""
        with self._write() as conn:
            ledger.insert_tool_call(
                conn,
                session_id=self._session_id,
                unit=self._unit(conn) if unit is None else unit,
                turn=turn,
                tool=tool,
                arguments=arguments,
                result=result,
                ok=ok,
                error=error,
            )

    def llm_calls(self) -> list[CallRecord]:
        with self._lock:
            return ledger.llm_calls(self._conn)

    def tool_calls(self, unit: int | None = None) -> list[ToolCall]:
        with self._lock:
            return ledger.tool_calls(self._conn, unit)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """A read-only query for reports (``show``, evaluation)."""
        return self._read(sql, params)


def _json(value: Any, what: str) -> str:
    try:
        return canonical_json(value)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} must be JSON-serialisable: {exc}") from exc


def pid_alive(pid: int | None) -> bool:
    """Whether a process of this host still holds ``pid`` (one that exists but is another user's
    counts as alive): the one test of a stale ``running`` mark, for runs and batches alike."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
