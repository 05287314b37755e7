"""The schema, as an ordered list of migrations applied by the store on open.

Rules (as in simonw/llm): a migration that has shipped is never edited; a change is a new
function appended to ``MIGRATIONS``. ``PRAGMA user_version`` holds the number applied, and
each migration runs in the same transaction as its version bump, so a crash mid-upgrade
leaves the previous version intact. ``migrations`` keeps when each one was applied.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

from agent.store.db import APPLICATION_ID, atomic

Migration = Callable[[sqlite3.Connection], None]


def _run(conn: sqlite3.Connection, statements: list[str]) -> None:
    # One statement at a time: executescript() would COMMIT the open transaction.
    for statement in statements:
        conn.execute(statement)


def m001_core(conn: sqlite3.Connection) -> None:
    """The run, its plan, chapters with their version history, states, sessions."""
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    _run(
        conn,
        [
            """CREATE TABLE migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)""",
            """CREATE TABLE run (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            pipeline TEXT NOT NULL,
            unit_kind TEXT NOT NULL CHECK (unit_kind IN ('chapter', 'step')),
            config TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            model TEXT,
            backend TEXT,
            status TEXT NOT NULL DEFAULT 'created'
                CHECK (status IN ('created', 'running', 'stopped', 'failed', 'completed')),
            error TEXT,
            target_units INTEGER CHECK (target_units IS NULL OR target_units >= 0),
            last_unit INTEGER NOT NULL DEFAULT 0 CHECK (last_unit >= 0),
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            finished_at REAL)""",
            """CREATE TABLE plan (key TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at REAL NOT NULL)""",
            """CREATE TABLE chapters (
            idx INTEGER PRIMARY KEY CHECK (idx >= 1),
            title TEXT NOT NULL,
            text TEXT NOT NULL,
            words INTEGER NOT NULL CHECK (words >= 0),
            version INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1),
            degraded INTEGER NOT NULL DEFAULT 0 CHECK (degraded IN (0, 1)),
            degraded_reason TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL)""",
            """CREATE TABLE chapter_versions (
            idx INTEGER NOT NULL REFERENCES chapters (idx) ON DELETE CASCADE,
            version INTEGER NOT NULL,
            title TEXT NOT NULL,
            text TEXT NOT NULL,
            words INTEGER NOT NULL,
            reason TEXT NOT NULL,
            unit INTEGER,
            created_at REAL NOT NULL,
            PRIMARY KEY (idx, version))""",
            """CREATE TABLE states (unit INTEGER PRIMARY KEY CHECK (unit >= 0), state TEXT NOT NULL,
            created_at REAL NOT NULL)""",
            """CREATE TABLE sessions (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            pid INTEGER NOT NULL,
            host TEXT NOT NULL,
            config TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            started_at REAL NOT NULL,
            last_at REAL NOT NULL,
            ended_at REAL,
            outcome TEXT)""",
        ],
    )


def m002_chapter_search(conn: sqlite3.Connection) -> None:
    """Sentence windows of every chapter and their FTS5 index (NstAgent A.1).

    ``chapter_windows`` holds each window's offsets into the chapter text (the window is
    quoted from the chapter itself) and the indexed form of its three sentences; the FTS
    table is an external-content index over it, kept in step by triggers. Chapters that
    exist already are indexed here (with the windowing of the fabula doing the upgrade).
    """
    from agent.store.search import index_chapter

    _run(
        conn,
        [
            """CREATE TABLE chapter_windows (
            id INTEGER PRIMARY KEY,
            chapter INTEGER NOT NULL REFERENCES chapters (idx) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            start INTEGER NOT NULL,
            end INTEGER NOT NULL,
            prev TEXT NOT NULL,
            centre TEXT NOT NULL,
            next TEXT NOT NULL,
            UNIQUE (chapter, position))""",
            """CREATE VIRTUAL TABLE chapter_fts USING fts5(
            prev, centre, next,
            content = 'chapter_windows', content_rowid = 'id',
            tokenize = 'porter unicode61 remove_diacritics 2')""",
            """CREATE TRIGGER chapter_windows_ai AFTER INSERT ON chapter_windows BEGIN
            INSERT INTO chapter_fts (rowid, prev, centre, next) VALUES (new.id, new.prev, new.centre, new.next);
        END""",
            """CREATE TRIGGER chapter_windows_ad AFTER DELETE ON chapter_windows BEGIN
            INSERT INTO chapter_fts (chapter_fts, rowid, prev, centre, next)
            VALUES ('delete', old.id, old.prev, old.centre, old.next);
        END""",
        ],
    )
    for index, text in conn.execute("SELECT idx, text FROM chapters").fetchall():
        index_chapter(conn, index, text)


def m003_ledgers(conn: sqlite3.Connection) -> None:
    """Every tool call and every LLM call; chat messages stored once by content hash."""
    _run(
        conn,
        [
            """CREATE TABLE tool_calls (
            id INTEGER PRIMARY KEY,
            session_id INTEGER REFERENCES sessions (id),
            unit INTEGER NOT NULL,
            turn INTEGER NOT NULL,
            tool TEXT NOT NULL,
            arguments TEXT NOT NULL,
            result TEXT,
            ok INTEGER NOT NULL CHECK (ok IN (0, 1)),
            error TEXT,
            created_at REAL NOT NULL)""",
            """CREATE INDEX tool_calls_unit ON tool_calls (unit)""",
            """CREATE TABLE llm_messages (hash TEXT PRIMARY KEY, role TEXT NOT NULL, content TEXT NOT NULL)""",
            """CREATE TABLE llm_calls (
            id INTEGER PRIMARY KEY,
            session_id INTEGER REFERENCES sessions (id),
            unit INTEGER,
            role TEXT,
            backend TEXT NOT NULL,
            model TEXT NOT NULL,
            temperature REAL NOT NULL,
            max_tokens INTEGER NOT NULL,
            schema_name TEXT,
            prompt_tokens INTEGER NOT NULL,
            cached_prompt_tokens INTEGER NOT NULL,
            completion_tokens INTEGER NOT NULL,
            latency_s REAL NOT NULL,
            finish_reason TEXT,
            error TEXT,
            messages TEXT NOT NULL,
            text TEXT,
            created_at REAL NOT NULL)""",
            """CREATE INDEX llm_calls_unit ON llm_calls (unit)""",
        ],
    )


def m004_magnet(conn: sqlite3.Connection) -> None:
    """Magnet's timesteps (actions, critique, selection as JSON) and the paragraphs they add."""
    _run(
        conn,
        [
            """CREATE TABLE steps (
            step INTEGER PRIMARY KEY CHECK (step >= 1),
            goal TEXT,
            record TEXT NOT NULL,
            created_at REAL NOT NULL)""",
            """CREATE TABLE paragraphs (
            step INTEGER NOT NULL REFERENCES steps (step) ON DELETE CASCADE,
            seq INTEGER NOT NULL CHECK (seq >= 0),
            kind TEXT NOT NULL,
            text TEXT NOT NULL,
            words INTEGER NOT NULL,
            PRIMARY KEY (step, seq))""",
        ],
    )


def m005_judgments(conn: sqlite3.Connection) -> None:
    """Evaluation judgments (``fabula eval``): one row per (kind, item, judge, protocol).

    A row is ``ok`` (its parsed reply kept as JSON) or ``failed`` (the error kept, never read
    as zero errors); a rerun fills only the missing and failed rows. ``meta`` holds what the
    judgment was computed against (window, sampled sections, criteria), so every metric can
    be recomputed from the store without calling a model again. Judge usage is kept here,
    apart from ``llm_calls``, so that evaluation never counts toward a story's cost.
    """
    _run(
        conn,
        [
            """CREATE TABLE judgments (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            item TEXT NOT NULL,
            judge TEXT NOT NULL,
            protocol TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
            reply TEXT,
            error TEXT,
            meta TEXT NOT NULL DEFAULT '{}',
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            latency_s REAL NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 1 CHECK (attempts >= 1),
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            CHECK ((status = 'ok') = (reply IS NOT NULL)),
            UNIQUE (kind, item, judge, protocol))""",
            """CREATE INDEX judgments_kind ON judgments (kind, judge, protocol)""",
        ],
    )


def m006_paragraph_versions(conn: sqlite3.Connection) -> None:
    """Earlier texts of revised Magnet paragraphs (a revision keeps what it replaced)."""
    _run(
        conn,
        [
            """CREATE TABLE paragraph_versions (
            step INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            version INTEGER NOT NULL CHECK (version >= 1),
            text TEXT NOT NULL,
            words INTEGER NOT NULL,
            replaced_by TEXT NOT NULL,
            replaced_at REAL NOT NULL,
            PRIMARY KEY (step, seq, version),
            FOREIGN KEY (step, seq) REFERENCES paragraphs (step, seq) ON DELETE CASCADE)""",
        ],
    )


def m007_call_sampling(conn: sqlite3.Connection) -> None:
    """The sampling controls each model call was made with (JSON, only those set; NULL: none)."""
    _run(conn, ["ALTER TABLE llm_calls ADD COLUMN sampling TEXT"])


def m008_paragraph_search(conn: sqlite3.Connection) -> None:
    """An FTS5 index of Magnet paragraphs (long-range memory: BM25 recall of earlier passages).

    External content over ``paragraphs``, kept in step by triggers, so a paragraph is indexed
    in the transaction that commits (or revises) it; paragraphs that exist already are indexed
    here."""
    _run(
        conn,
        [
            """CREATE VIRTUAL TABLE paragraph_fts USING fts5(
            text, content = 'paragraphs', content_rowid = 'rowid',
            tokenize = 'porter unicode61 remove_diacritics 2')""",
            """CREATE TRIGGER paragraphs_ai AFTER INSERT ON paragraphs BEGIN
            INSERT INTO paragraph_fts (rowid, text) VALUES (new.rowid, new.text);
        END""",
            """CREATE TRIGGER paragraphs_ad AFTER DELETE ON paragraphs BEGIN
            INSERT INTO paragraph_fts (paragraph_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
        END""",
            """CREATE TRIGGER paragraphs_au AFTER UPDATE OF text ON paragraphs BEGIN
            INSERT INTO paragraph_fts (paragraph_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
            INSERT INTO paragraph_fts (rowid, text) VALUES (new.rowid, new.text);
        END""",
            """INSERT INTO paragraph_fts (paragraph_fts) VALUES ('rebuild')""",
        ],
    )


def m009_call_min_tokens(conn: sqlite3.Connection) -> None:
    """The ``min_tokens`` floor each model call asked for (NULL: none), so a run shows whether a
    floor was sent (the ``paper`` profile sends none)."""
    _run(conn, ["ALTER TABLE llm_calls ADD COLUMN min_tokens INTEGER"])


def m010_call_reasoning(conn: sqlite3.Connection) -> None:
    """The reasoning a thinking model wrote before its answer (NULL: none), kept apart from the
    answer the conversation carries (``--thinking on``)."""
    _run(conn, ["ALTER TABLE llm_calls ADD COLUMN reasoning TEXT"])


def m011_call_timing(conn: sqlite3.Connection) -> None:
    """Where each in-process call's time went (JSON seconds per part of
    :data:`agent.llm.types.TIMING_PARTS`; NULL: a server's call, or one from before)."""
    _run(conn, ["ALTER TABLE llm_calls ADD COLUMN timing TEXT"])


def m012_call_tool_calls(conn: sqlite3.Connection) -> None:
    """The native tool calls a reply made (JSON, the OpenAI ``tool_calls`` shape) and the tools its
    request offered (JSON names); NULL: none (the paper profile's native tool protocol)."""
    _run(conn, ["ALTER TABLE llm_calls ADD COLUMN tool_calls TEXT", "ALTER TABLE llm_calls ADD COLUMN tools TEXT"])


MIGRATIONS: list[Migration] = [
    m001_core,
    m002_chapter_search,
    m003_ledgers,
    m004_magnet,
    m005_judgments,
    m006_paragraph_versions,
    m007_call_sampling,
    m008_paragraph_search,
    m009_call_min_tokens,
    m010_call_reasoning,
    m011_call_timing,
    m012_call_tool_calls,
]
LATEST = len(MIGRATIONS)


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, *, target: int = LATEST) -> list[int]:
    """Apply every migration after the current version up to ``target``; return those applied.

    The version is read inside each migration's write transaction, so two processes opening
    the same database at once (a reader upgrading while a writer creates) never apply a
    migration twice.
    """
    applied: list[int] = []
    while True:
        with atomic(conn):
            version = schema_version(conn) + 1
            if version > target:
                return applied
            migration = MIGRATIONS[version - 1]
            migration(conn)
            conn.execute(
                "INSERT INTO migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (version, migration.__name__, time.time()),
            )
            conn.execute(f"PRAGMA user_version = {version}")
        applied.append(version)
