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
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.store import chapters as chapter_rows
from agent.store import magnet, search_ref
from agent.store import search as chapter_search
from agent.store.config import fingerprint
from agent.store.db import APPLICATION_ID, atomic, connect, looks_like_sqlite
from agent.store.errors import (
    CommitError,
    DiskFullError,
    NotARunError,
    ReadOnlyRunError,
    SchemaTooNewError,
    StoreError,
    WrongPipelineError,
)
from agent.store.migrations import LATEST, migrate, schema_version
from agent.store.paths import DB_NAME, new_run_dir, resolve_run_dir
from agent.store.records import Chapter, Paragraph, RunInfo, stored_text
from agent.store.run_db import RunDb, to_json
from agent.store.run_parts import Ledger, PlanRecords, Sessions
from agent.text import without_nul

UNIT_KINDS = ("chapter", "step")
REQUIRED_TABLES = frozenset({"run", "chapters", "states", "llm_calls", "sessions", "plan", "steps", "paragraphs"})
"""Tables every run of the latest schema has; one missing means the database was damaged."""


class RunStore:
    """The run database of one run directory: opening it, the run record, committing and reading units;
    its named parts hold the rest (``sessions``, ``plans``, ``ledger``). Open with :meth:`create` or
    :meth:`open`."""

    def __init__(self, run_dir: Path, conn: sqlite3.Connection, *, readonly: bool) -> None:
        self.db = RunDb(run_dir, conn, readonly=readonly)
        self.run_dir, self.path, self.readonly = self.db.run_dir, self.db.path, readonly
        self.sessions = Sessions(self.db)
        """Holding the run for writing (``with store.sessions.hold("start"): ...``)."""
        self.plans = PlanRecords(self.db)
        """The plan's named records (premise, outline, title, the server probe, ...)."""
        self.ledger = Ledger(self.db)
        """Every model call and tool call, filed under the unit in flight."""
        self._reference_index: search_ref.ReferenceIndex | None = None
        """The reference-style search's in-memory index (built on first use; ``search_style="reference"``)."""

    # -- opening -------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        run_dir: str | os.PathLike[str],
        *,
        pipeline: str,
        config: dict[str, Any],
        unit_kind: str = "chapter",
        model: str | None = None,
        backend: str | None = None,
        target_units: int | None = None,
        initial_state: Any = None,
    ) -> RunStore:
        """Create a new run in ``run_dir`` (made if missing; refused if it already holds a run)."""
        if unit_kind not in UNIT_KINDS:
            raise StoreError(f"unit kind must be one of {', '.join(UNIT_KINDS)}, not {unit_kind!r}")
        config_json = to_json(config, "config")
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
                    conn.execute(
                        "INSERT INTO states (unit, state, created_at) VALUES (0, ?, ?)",
                        (to_json(initial_state, "state"), now),
                    )
        except sqlite3.IntegrityError as exc:
            conn.close()
            raise StoreError(f"{run_dir} already holds a run") from exc
        except BaseException:
            conn.close()
            raise
        store = cls(folder, conn, readonly=False)
        store.db.checkpoint("TRUNCATE")  # the schema and run record in run.db itself from the start
        return store

    @classmethod
    def open(cls, run_dir: str | os.PathLike[str], *, readonly: bool = False, pipeline: str | None = None) -> RunStore:
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
        if not readonly and _read_only_file_system(folder):
            raise ReadOnlyRunError(
                f"the run is on a read-only file system ({folder}); show, search and export work "
                "there, writing does not"
            )
        conn = connect(db, readonly=readonly)
        store = cls(folder, conn, readonly=readonly)
        if not readonly:
            store.db.checkpoint()  # fold in what a killed writer left in the log
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
        with self.db.lock:
            if not self.readonly:
                self.db.checkpoint("TRUNCATE")
            self.db.conn.close()

    def backup_to(self, target: Path) -> None:
        """A consistent single-file copy of the run (SQLite's backup API: safe while a writer works)."""
        tmp = target.with_name(f".{target.name}.partial")
        tmp.unlink(missing_ok=True)
        dest = sqlite3.connect(str(tmp))
        try:
            with self.db.lock:
                self.db.conn.backup(dest)
            dest.execute("PRAGMA journal_mode = DELETE")
        finally:
            dest.close()
        os.replace(tmp, target)

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def schema_version(self) -> int:
        with self.db.lock:
            return schema_version(self.db.conn)

    # -- the run ---------------------------------------------------------------------------
    def info(self) -> RunInfo:
        return self.db.info()

    def live_status(self) -> str:
        """The stored status, except that a ``running`` run whose process is gone (killed,
        crashed, machine rebooted) reads as ``interrupted``, and a stopped run that waits for the
        writer (``--review``, ``agent.store.writer.review``) reads as ``review``."""
        status = self.info().status
        if status == "stopped" and self.db.read("SELECT 1 FROM plan WHERE key = 'in_review'"):
            return "review"
        if status != "running":
            return status
        return "interrupted" if self.sessions.writer_gone() else "running"

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """A read-only query for reports (``show``, evaluation)."""
        return self.db.read(sql, params)

    def next_unit(self) -> int:
        """The unit to work on next: one after the last committed."""
        return self.info().last_unit + 1

    def words_written(self) -> int:
        """Words of story committed so far (chapters, or every paragraph of a step run)."""
        table = "chapters" if self.info().unit_kind == "chapter" else "paragraphs"
        return int(self.db.read(f"SELECT coalesce(sum(words), 0) FROM {table}")[0][0])

    def set_target(self, units: int) -> None:
        """How many units the finished run will have (known once the plan is made)."""
        with self.db.write() as conn:
            conn.execute("UPDATE run SET target_units = ?, updated_at = ? WHERE id = 1", (units, time.time()))

    def finish(self) -> None:
        """Mark the run completed (the pipeline calls this after its last unit)."""
        now = time.time()
        with self.db.write() as conn:
            conn.execute(
                "UPDATE run SET status = 'completed', error = NULL, finished_at = ?, updated_at = ? WHERE id = 1",
                (now, now),
            )

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
        conn.execute(
            "INSERT INTO states (unit, state, created_at) VALUES (?, ?, ?)", (unit, to_json(state, "state"), now)
        )
        conn.execute("UPDATE run SET last_unit = ?, updated_at = ? WHERE id = 1", (unit, now))
        if self.db.session_id is not None:
            conn.execute("UPDATE sessions SET last_at = ? WHERE id = ?", (now, self.db.session_id))

    def commit_chapter(
        self,
        index: int,
        title: str,
        text: str,
        *,
        state: Any,
        degraded: bool = False,
        degraded_reason: str | None = None,
    ) -> Chapter:
        """Commit chapter ``index`` (the next one), its search windows and the state after it."""
        with self.db.write() as conn:
            self._advance(conn, "chapter", index, state)
            chapter = chapter_rows.insert(
                conn, index, without_nul(title), without_nul(text), degraded=degraded, degraded_reason=degraded_reason
            )
        self.db.checkpoint()
        return chapter

    def commit_step(
        self,
        step: int,
        paragraphs: Sequence[magnet.ParagraphSpec],
        *,
        state: Any,
        record: dict[str, Any],
        goal: str | None = None,
    ) -> list[Paragraph]:
        """Commit Magnet timestep ``step`` (the next one): its record, paragraphs and state."""
        with self.db.write() as conn:
            self._advance(conn, "step", step, state)
            clean = [without_nul(p) if isinstance(p, str) else (p[0], without_nul(p[1])) for p in paragraphs]
            rows = magnet.insert_step(conn, step, clean, goal=goal, record=record)
        self.db.checkpoint()
        return rows

    def correct_chapter(self, index: int, old: str, new: str, *, reason: str = "correct") -> Chapter:
        """Replace the one exact occurrence of ``old`` in a committed chapter; reindexed at once."""
        with self.db.write() as conn:
            current = chapter_rows.get(conn, index)
            if current is None:
                raise CommitError(f"chapter {index} does not exist")
            text = chapter_rows.replace_span(current.text, old, without_nul(new), index=index)
            return chapter_rows.revise(conn, index, text, title=None, reason=reason, unit=self.db.unit(conn))

    def revise_chapter(self, index: int, text: str, *, title: str | None = None, reason: str) -> Chapter:
        """Replace a committed chapter's whole text (the old version is kept); reindexed at once."""
        with self.db.write() as conn:
            return chapter_rows.revise(
                conn, index, without_nul(text), title=title, reason=reason, unit=self.db.unit(conn)
            )

    def replace_state(self, unit: int, state: Any) -> None:
        """Replace the state stored with committed ``unit`` (an edit, or a state re-derived from an
        edited text); the unit must exist."""
        with self.db.write() as conn:
            cursor = conn.execute("UPDATE states SET state = ? WHERE unit = ?", (to_json(state, "state"), unit))
            if cursor.rowcount != 1:
                raise CommitError(f"unit {unit} has no stored state")

    # -- reading units ---------------------------------------------------------------------

    def chapter(self, index: int) -> Chapter | None:
        with self.db.lock:
            return chapter_rows.get(self.db.conn, index)

    def chapters(self) -> list[Chapter]:
        with self.db.lock:
            return chapter_rows.all_chapters(self.db.conn)

    def chapter_versions(self, index: int) -> list[dict[str, Any]]:
        with self.db.lock:
            return chapter_rows.versions(self.db.conn, index)

    def paragraphs(self) -> list[Paragraph]:
        with self.db.lock:
            return magnet.all_paragraphs(self.db.conn)

    def revise_paragraph(self, step: int, seq: int, text: str, *, reason: str) -> Paragraph:
        """Replace a committed Magnet paragraph's text (the old text is kept as a version)."""
        with self.db.write() as conn:
            return magnet.revise_paragraph(conn, step, seq, without_nul(text), reason=reason)

    def paragraph_versions(self, step: int, seq: int) -> list[dict[str, Any]]:
        with self.db.lock:
            return magnet.paragraph_versions(self.db.conn, step, seq)

    def steps(self) -> list[dict[str, Any]]:
        with self.db.lock:
            return magnet.steps(self.db.conn)

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
        with self.db.lock:
            return chapter_search.search(self.db.conn, query, k=k, before=before)

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
        with self.db.lock:
            rows = self.db.conn.execute(
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
        with self.db.lock:
            return chapter_search.reader_search(self.db.conn, query, k=k, before=before)

    def search_paragraphs(self, query: str, *, k: int, before_step: int) -> list[Paragraph]:
        """Magnet's long-range memory: the ``k`` best-matching paragraphs of earlier steps (BM25)."""
        with self.db.lock:
            return magnet.search_paragraphs(self.db.conn, query, k=k, before_step=before_step)

    def state(self, unit: int | None = None) -> Any:
        """The state after ``unit`` (default: the latest); ``None`` if there is none."""
        if unit is None:
            rows = self.db.read("SELECT state FROM states ORDER BY unit DESC LIMIT 1")
        else:
            rows = self.db.read("SELECT state FROM states WHERE unit = ?", (unit,))
        return json.loads(rows[0][0]) if rows else None


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
            binary = _binary_text(conn, tables)
    except sqlite3.DatabaseError as exc:
        if _disk_full(db.parent):  # SQLite cannot make its -shm file: "disk I/O error", not damage
            raise DiskFullError(
                f"the disk is full; nothing already committed was lost (SQLite cannot open {db} "
                f"without a little free space: {exc}); free some space, then run the command "
                "again"
            ) from exc
        raise NotARunError(f"{db} is corrupt: {exc}") from exc
    finally:
        conn.close()
    if app_id != APPLICATION_ID:
        raise NotARunError(f"{db} is an SQLite database of some other program, not a fabula run")
    if binary:  # fabula writes text only: bytes there are damage, never shown as mojibake with success
        raise NotARunError(f"{db} is damaged: {binary} holds binary data, not text; restore the run from a copy")
    if missing:  # e.g. a hand-dropped chapters table: never "already completed" over a hole
        raise NotARunError(
            f"{db} is damaged: its {', '.join(missing)} table{'s are' if len(missing) > 1 else ' is'} missing"
        )
    if version > LATEST:
        raise SchemaTooNewError(f"{db} has schema version {version}; this fabula knows up to {LATEST} (upgrade fabula)")
    return version


def _binary_text(conn: sqlite3.Connection, tables: set[str]) -> str | None:
    """The first story text column damaged into a BLOB (``chapter 3's text``), or None."""
    if "chapters" in tables:
        row = conn.execute(
            "SELECT idx, typeof(title) = 'blob' FROM chapters WHERE typeof(text) = 'blob' "
            "OR typeof(title) = 'blob' LIMIT 1"
        ).fetchone()
        if row:
            return f"chapter {row[0]}'s {'title' if row[1] else 'text'}"
    if "paragraphs" in tables:
        row = conn.execute("SELECT step FROM paragraphs WHERE typeof(text) = 'blob' LIMIT 1").fetchone()
        if row:
            return f"a paragraph of step {row[0]}"
    return None


def _read_only_file_system(folder: Path) -> bool:
    """The file system holding ``folder`` is mounted read-only (SQLite would only say it cannot open the file)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _disk_full(folder: Path) -> bool:
    """The file system holding ``folder`` has (next to) no free space left."""
    import shutil

    try:
        return shutil.disk_usage(folder).free < 64 * 1024
    except OSError:
        return False
