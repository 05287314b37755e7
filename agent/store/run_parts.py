"""The named parts of :class:`agent.store.runstore.RunStore`, each over the run's one
:class:`agent.store.run_db.RunDb`: the sessions that hold a run for writing (``store.sessions``), the
plan's named records (``store.plans``) and the ledger of model and tool calls (``store.ledger``).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from filelock import FileLock, Timeout

from agent.llm.types import CallRecord
from agent.store import ledger
from agent.store.config import canonical_json, fingerprint
from agent.store.errors import RunBusyError
from agent.store.paths import LOCK_NAME, inside
from agent.store.records import RunInfo, ToolCall
from agent.store.run_db import RunDb, to_json


class Sessions:
    """Holding a run for writing, one process at a time, and what each session recorded."""

    def __init__(self, db: RunDb) -> None:
        self.db = db

    def writer_gone(self) -> bool:
        """The latest session never ended and its process on this machine is gone (killed, crashed, rebooted)."""
        rows = self.db.read("SELECT pid, host FROM sessions WHERE ended_at IS NULL ORDER BY id DESC LIMIT 1")
        if not rows:
            return True
        pid, host = rows[0]
        return host == socket.gethostname() and not pid_alive(pid)

    def last_transport(self) -> dict[str, Any] | None:
        """How the latest session that recorded one reached its model (backend, endpoint without
        credentials, model): where ``fabula resume`` finds the run's server again."""
        for (config,) in self.db.read("SELECT config FROM sessions ORDER BY id DESC"):
            try:
                transport = json.loads(config).get("transport")
            except (TypeError, ValueError, AttributeError):
                continue
            if isinstance(transport, dict):
                return transport
        return None

    @contextmanager
    def hold(
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
        lock = FileLock(str(inside(self.db.run_dir, LOCK_NAME)))
        try:
            lock.acquire(timeout=0)
        except Timeout as exc:
            raise RunBusyError(f"{self.db.run_dir} is being written by another process") from exc
        try:
            now = time.time()
            with self.db.write() as conn:
                if config is not None:
                    conn.execute(
                        "UPDATE run SET config = ?, fingerprint = ? WHERE id = 1",
                        (to_json(config, "config"), fingerprint(config)),
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
            self.db.session_id = int(cursor.lastrowid or 0)
            outcome, error = "stopped", None
            try:
                yield self.db.session_id
                outcome = "completed" if self.db.info().status == "completed" else "stopped"
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
        with suppress(sqlite3.Error), self.db.write() as conn:
            conn.execute(
                "UPDATE sessions SET ended_at = ?, last_at = ?, outcome = ? WHERE id = ?",
                (now, now, outcome, self.db.session_id),
            )
            conn.execute("UPDATE run SET status = ?, error = ?, updated_at = ? WHERE id = 1", (status, run_error, now))
        self.db.session_id = None


class PlanRecords:
    """The plan: named JSON parts (premise, outline, title, the server probe, ...)."""

    def __init__(self, db: RunDb) -> None:
        self.db = db

    def put(self, key: str, value: Any) -> None:
        """Store one part of the plan (premise, outline, ...) as JSON."""
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO plan (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE "
                "SET value = excluded.value, updated_at = excluded.updated_at",
                (key, to_json(value, "plan"), time.time()),
            )

    def update(self, values: dict[str, Any]) -> None:
        """Store several parts of the plan in one transaction (a writer's edit lands whole or not at all)."""
        rows = [(key, to_json(value, "plan"), time.time()) for key, value in values.items()]
        with self.db.write() as conn:
            conn.executemany(
                "INSERT INTO plan (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE "
                "SET value = excluded.value, updated_at = excluded.updated_at",
                rows,
            )

    def record_server_probe(self, probe: dict[str, Any]) -> None:
        """Keep what the model server was found to be and enforce (the endpoint backend's probe,
        taken when a session opens the model), so a degraded run shows why."""
        self.put("server_probe", probe)

    def server_probe(self) -> dict[str, Any] | None:
        return self.get("server_probe")

    def all(self) -> dict[str, Any]:
        return {r[0]: json.loads(r[1]) for r in self.db.read("SELECT key, value FROM plan ORDER BY key")}

    def delete(self, key: str) -> None:
        with self.db.write() as conn:
            conn.execute("DELETE FROM plan WHERE key = ?", (key,))

    def get(self, key: str, default: Any = None) -> Any:
        rows = self.db.read("SELECT value FROM plan WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else default


class Ledger:
    """Every model call and tool call, filed under the unit in flight."""

    def __init__(self, db: RunDb) -> None:
        self.db = db

    def record_llm_call(self, record: CallRecord) -> None:
        """The LLM layer's recorder: ``llm.recorders.append(store.ledger.record_llm_call)``. Thread-safe."""
        with self.db.write() as conn:
            ledger.insert_llm_call(conn, record, session_id=self.db.session_id, unit=self.db.unit(conn))

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
        with self.db.write() as conn:
            ledger.insert_tool_call(
                conn,
                session_id=self.db.session_id,
                unit=self.db.unit(conn) if unit is None else unit,
                turn=turn,
                tool=tool,
                arguments=arguments,
                result=result,
                ok=ok,
                error=error,
            )

    def llm_calls(self) -> list[CallRecord]:
        with self.db.lock:
            return ledger.llm_calls(self.db.conn)

    def tool_calls(self, unit: int | None = None) -> list[ToolCall]:
        with self.db.lock:
            return ledger.tool_calls(self.db.conn, unit)


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
