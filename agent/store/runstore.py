"""``RunStore``: one run directory, one SQLite database (``RUN_DIR/run.db``).

A *unit* is what a pipeline commits at once: a chapter (NstAgent and its baselines) or a
timestep (Magnet). A unit's text, search windows, state snapshot and the run's progress are
written in one transaction, units are committed strictly in order, and committing one twice
is refused, so a process killed at any moment loses at most the unit in flight and a resumed
run never duplicates one. LLM and tool calls are written as they happen (a paid call is
never lost with its unit).

One connection is shared by every thread of the process behind a lock: the LLM layer calls
the recorder from several threads at once when it runs requests concurrently.
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
from agent.store import ledger, magnet
from agent.store import search as chapter_search
from agent.store.config import canonical_json, fingerprint
from agent.store.db import APPLICATION_ID, atomic, connect, looks_like_sqlite
from agent.store.errors import (
    CommitError,
    DiskFullError,
    NotARunError,
    RunBusyError,
    SchemaTooNewError,
    StoreError,
    WrongPipelineError,
)
from agent.store.migrations import LATEST, migrate, schema_version
from agent.store.paths import DB_NAME, LOCK_NAME, inside, new_run_dir, resolve_run_dir
from agent.store.records import Chapter, Paragraph, RunInfo, ToolCall
from agent.text import without_nul

UNIT_KINDS = ("chapter", "step")
REQUIRED_TABLES = frozenset({"run", "chapters", "states", "llm_calls", "sessions", "plan", "steps", "paragraphs"})
"""Tables every run of the latest schema has; one missing means the database was damaged."""


class RunStore:
    """The run database of one run directory. Open with :meth:`create` or :meth:`open`."""

    def __init__(self, run_dir: Path, conn: sqlite3.Connection, *, readonly: bool) -> None:
        self.run_dir = run_dir
        self.path = run_dir / DB_NAME
        self.readonly = readonly
        self._conn = conn
        self._lock = threading.RLock()
        self._session_id: int | None = None
        self.unit_in_flight: int | None = None
        """Unit that ledger rows are filed under; ``None`` means the next uncommitted unit.
        A pipeline sets ``0`` while it plans, before the first unit."""

    # -- opening -------------------------------------------------------------------------
    @classmethod
    def create(cls, run_dir: str | os.PathLike[str], *, pipeline: str, config: dict[str, Any],
               unit_kind: str = "chapter", model: str | None = None, backend: str | None = None,
               target_units: int | None = None, initial_state: Any = None) -> RunStore:
        """Create a new run in ``run_dir`` (made if missing; refused if it already holds a run)."""
        if unit_kind not in UNIT_KINDS:
            raise StoreError(f"unit kind must be one of {', '.join(UNIT_KINDS)}, not {unit_kind!r}")
        config_json = _json(config, "config")
        folder = new_run_dir(run_dir)
        conn = connect(folder / DB_NAME)
        try:
            migrate(conn)
            now = time.time()
            with atomic(conn):
                conn.execute(
                    "INSERT INTO run (id, pipeline, unit_kind, config, fingerprint, model, backend, target_units, "
                    "created_at, updated_at) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (pipeline, unit_kind, config_json, fingerprint(config), model, backend, target_units, now, now),
                )
                if initial_state is not None:
                    conn.execute("INSERT INTO states (unit, state, created_at) VALUES (0, ?, ?)",
                                 (_json(initial_state, "state"), now))
        except sqlite3.IntegrityError as exc:
            conn.close()
            raise StoreError(f"{run_dir} already holds a run") from exc
        except BaseException:
            conn.close()
            raise
        store = cls(folder, conn, readonly=False)
        store._checkpoint("TRUNCATE")  # the schema and run record in run.db itself from the start
        return store

    @classmethod
    def open(cls, run_dir: str | os.PathLike[str], *, readonly: bool = False,
             pipeline: str | None = None) -> RunStore:
        """Open an existing run. The database is checked read-only first, so a corrupt,
        foreign or too-new file is refused without being touched; an older schema is
        upgraded (the only write a read-only open may cause)."""
        folder = resolve_run_dir(run_dir)
        db = folder / DB_NAME
        version = _check_database(db)
        if version < LATEST:
            upgrade = connect(db)
            try:
                migrate(upgrade)
            finally:
                upgrade.close()
        conn = connect(db, readonly=readonly)
        store = cls(folder, conn, readonly=readonly)
        if not readonly:
            store._checkpoint()  # fold in what a killed writer left in the log
        try:
            info = store.info()
        except (sqlite3.DatabaseError, StoreError) as exc:
            store.close()
            raise NotARunError(f"{db}: unreadable run record ({exc})") from exc
        if pipeline is not None and info.pipeline != pipeline:
            store.close()
            raise WrongPipelineError(f"{run_dir} is a {info.pipeline} run, not {pipeline}")
        return store

    def close(self) -> None:
        with self._lock:
            if not self.readonly:
                self._checkpoint("TRUNCATE")
            self._conn.close()

    def _checkpoint(self, mode: str = "PASSIVE") -> None:
        """Copy the write-ahead log into ``run.db`` so that the file alone holds every committed
        unit (a user who copies only ``run.db`` after a kill -9 loses nothing committed)."""
        with suppress(sqlite3.Error):
            self._conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()

    def backup_to(self, target: Path) -> None:
        """A consistent single-file copy of the run (SQLite's backup API: safe while a writer works)."""
        tmp = target.with_name(f".{target.name}.partial")
        tmp.unlink(missing_ok=True)
        dest = sqlite3.connect(str(tmp))
        try:
            with self._lock:
                self._conn.backup(dest)
            dest.execute("PRAGMA journal_mode = DELETE")
        finally:
            dest.close()
        os.replace(tmp, target)

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ------------------------------------------------------------------------
    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if self.readonly:
            raise StoreError(f"{self.run_dir} is open read-only")
        with self._lock, atomic(self._conn) as conn:
            yield conn

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def schema_version(self) -> int:
        with self._lock:
            return schema_version(self._conn)

    # -- the run ---------------------------------------------------------------------------
    def info(self) -> RunInfo:
        rows = self._read("SELECT * FROM run WHERE id = 1")
        if not rows:
            raise NotARunError(f"{self.path} has no run record")
        return RunInfo.from_row(rows[0])

    def next_unit(self) -> int:
        """The unit to work on next: one after the last committed."""
        return self.info().last_unit + 1

    def words_written(self) -> int:
        """Words of story committed so far (chapters, or every paragraph of a step run)."""
        table = "chapters" if self.info().unit_kind == "chapter" else "paragraphs"
        return int(self._read(f"SELECT coalesce(sum(words), 0) FROM {table}")[0][0])

    def set_target(self, units: int) -> None:
        """How many units the finished run will have (known once the plan is made)."""
        with self._write() as conn:
            conn.execute("UPDATE run SET target_units = ?, updated_at = ? WHERE id = 1", (units, time.time()))

    def finish(self) -> None:
        """Mark the run completed (the pipeline calls this after its last unit)."""
        now = time.time()
        with self._write() as conn:
            conn.execute("UPDATE run SET status = 'completed', error = NULL, finished_at = ?, updated_at = ? "
                         "WHERE id = 1", (now, now))

    def live_status(self) -> str:
        """The stored status, except that a ``running`` run whose process is gone (killed,
        crashed, machine rebooted) reads as ``interrupted``."""
        status = self.info().status
        if status != "running":
            return status
        rows = self._read("SELECT pid, host FROM sessions WHERE ended_at IS NULL ORDER BY id DESC LIMIT 1")
        if not rows:
            return "interrupted"
        pid, host = rows[0]
        if host == socket.gethostname() and not _pid_alive(pid):
            return "interrupted"
        return "running"

    @contextmanager
    def session(self, kind: str, *, config: dict[str, Any] | None = None,
                transport: dict[str, Any] | None = None, keep_status: bool = False) -> Iterator[int]:
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
                    conn.execute("UPDATE run SET config = ?, fingerprint = ? WHERE id = 1",
                                 (_json(config, "config"), fingerprint(config)))
                info = RunInfo.from_row(conn.execute("SELECT * FROM run").fetchone())
                kept = (info.status, info.error) if keep_status else None
                cursor = conn.execute(
                    "INSERT INTO sessions (kind, pid, host, config, fingerprint, started_at, last_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (kind, os.getpid(), socket.gethostname(),
                     canonical_json({**info.config, "transport": transport} if transport else info.config),
                     info.fingerprint, now, now),
                )
                conn.execute("UPDATE run SET status = 'running', error = NULL, finished_at = NULL, updated_at = ? "
                             "WHERE id = 1", (now,))
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
            conn.execute("UPDATE sessions SET ended_at = ?, last_at = ?, outcome = ? WHERE id = ?",
                         (now, now, outcome, self._session_id))
            conn.execute("UPDATE run SET status = ?, error = ?, updated_at = ? WHERE id = 1", (status, run_error, now))
        self._session_id = None

    # -- plan ----------------------------------------------------------------------------
    def put_plan(self, key: str, value: Any) -> None:
        """Store one part of the plan (premise, outline, ...) as JSON."""
        with self._write() as conn:
            conn.execute("INSERT INTO plan (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE "
                         "SET value = excluded.value, updated_at = excluded.updated_at",
                         (key, _json(value, "plan"), time.time()))

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

    # -- units ---------------------------------------------------------------------------
    def _advance(self, conn: sqlite3.Connection, kind: str, unit: int, state: Any) -> None:
        """Check ``unit`` is next, then record its state and the run's progress."""
        row = conn.execute("SELECT unit_kind, last_unit FROM run WHERE id = 1").fetchone()
        if row["unit_kind"] != kind:
            raise CommitError(f"this run's units are {row['unit_kind']}s, not {kind}s")
        last = row["last_unit"]
        if unit <= last:
            raise CommitError(f"{kind} {unit} is already committed (last committed: {last})")
        if unit != last + 1:
            raise CommitError(f"{kind} {unit} is out of order: the next {kind} is {last + 1}")
        now = time.time()
        conn.execute("INSERT INTO states (unit, state, created_at) VALUES (?, ?, ?)",
                     (unit, _json(state, "state"), now))
        conn.execute("UPDATE run SET last_unit = ?, updated_at = ? WHERE id = 1", (unit, now))
        if self._session_id is not None:
            conn.execute("UPDATE sessions SET last_at = ? WHERE id = ?", (now, self._session_id))

    def commit_chapter(self, index: int, title: str, text: str, *, state: Any, degraded: bool = False,
                       degraded_reason: str | None = None) -> Chapter:
        """Commit chapter ``index`` (the next one), its search windows and the state after it."""
        with self._write() as conn:
            self._advance(conn, "chapter", index, state)
            chapter = chapter_rows.insert(conn, index, without_nul(title), without_nul(text), degraded=degraded,
                                          degraded_reason=degraded_reason)
        self._checkpoint()
        return chapter

    def commit_step(self, step: int, paragraphs: Sequence[magnet.ParagraphSpec], *, state: Any,
                    record: dict[str, Any], goal: str | None = None) -> list[Paragraph]:
        """Commit Magnet timestep ``step`` (the next one): its record, paragraphs and state."""
        with self._write() as conn:
            self._advance(conn, "step", step, state)
            clean = [without_nul(p) if isinstance(p, str) else (p[0], without_nul(p[1])) for p in paragraphs]
            rows = magnet.insert_step(conn, step, clean, goal=goal, record=record)
        self._checkpoint()
        return rows

    def correct_chapter(self, index: int, old: str, new: str, *, reason: str = "correct") -> Chapter:
        """Replace the one exact occurrence of ``old`` in a committed chapter; reindexed at once."""
        with self._write() as conn:
            current = chapter_rows.get(conn, index)
            if current is None:
                raise CommitError(f"chapter {index} does not exist")
            text = chapter_rows.replace_span(current.text, old, without_nul(new), index=index)
            return chapter_rows.revise(conn, index, text, title=None, reason=reason, unit=self._unit(conn))

    def revise_chapter(self, index: int, text: str, *, title: str | None = None, reason: str) -> Chapter:
        """Replace a committed chapter's whole text (the old version is kept); reindexed at once."""
        with self._write() as conn:
            return chapter_rows.revise(conn, index, without_nul(text), title=title, reason=reason,
                                       unit=self._unit(conn))

    def replace_state(self, unit: int, state: Any) -> None:
        """Replace the state stored with committed ``unit`` (an edit, or a state re-derived from an
        edited text); the unit must exist."""
        with self._write() as conn:
            cursor = conn.execute("UPDATE states SET state = ? WHERE unit = ?", (_json(state, "state"), unit))
            if cursor.rowcount != 1:
                raise CommitError(f"unit {unit} has no stored state")

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

    def search(self, query: str, *, k: int = chapter_search.DEFAULT_K,
               before: int | None = None) -> list[chapter_search.Hit]:
        """The writer's search: the ``k`` best sentence windows, from chapters below ``before``."""
        with self._lock:
            return chapter_search.search(self._conn, query, k=k, before=before)

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

    # -- ledgers -------------------------------------------------------------------------
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

    def record_tool_call(self, *, turn: int, tool: str, arguments: Any, result: str | None = None,
                         ok: bool = True, error: str | None = None, unit: int | None = None) -> None:
        """Record one tool call of the unit in flight (or of ``unit``)."""
        with self._write() as conn:
            ledger.insert_tool_call(conn, session_id=self._session_id, unit=self._unit(conn) if unit is None else unit,
                                    turn=turn, tool=tool, arguments=arguments, result=result, ok=ok, error=error)

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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _check_database(db: Path) -> int:
    """Refuse a file that is not a fabula run of a schema we know; return its version."""
    if db.stat().st_size == 0:
        raise NotARunError(f"{db} is empty (a run that never started?)")
    if not looks_like_sqlite(db):
        raise NotARunError(f"{db} is not an SQLite database (corrupt or foreign file)")
    try:
        conn = connect(db, readonly=True)
    except sqlite3.Error as exc:
        raise NotARunError(f"{db} cannot be opened: {exc}") from exc
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = schema_version(conn)
        missing: list[str] = []
        if app_id == APPLICATION_ID:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
            if version >= LATEST:  # an older schema gains its tables when it is upgraded
                missing = sorted(REQUIRED_TABLES - tables)
    except sqlite3.DatabaseError as exc:
        if _disk_full(db.parent):  # SQLite cannot make its -shm file: "disk I/O error", not damage
            raise DiskFullError(f"the disk is full; nothing already committed was lost (SQLite cannot open {db} "
                                f"without a little free space: {exc}); free some space, then run the command "
                                "again") from exc
        raise NotARunError(f"{db} is corrupt: {exc}") from exc
    finally:
        conn.close()
    if app_id != APPLICATION_ID:
        raise NotARunError(f"{db} is an SQLite database of some other program, not a fabula run")
    if missing:  # e.g. a hand-dropped chapters table: never "already completed" over a hole
        raise NotARunError(f"{db} is damaged: its {', '.join(missing)} table{'s are' if len(missing) > 1 else ' is'} "
                           "missing")
    if version > LATEST:
        raise SchemaTooNewError(f"{db} has schema version {version}; this fabula knows up to {LATEST} (upgrade fabula)")
    return version


def _disk_full(folder: Path) -> bool:
    """The file system holding ``folder`` has (next to) no free space left."""
    import shutil

    try:
        return shutil.disk_usage(folder).free < 64 * 1024
    except OSError:
        return False
