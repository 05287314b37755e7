"""Evaluation judgments kept in the judged run's own database (table ``judgments``).

One row per (kind, item, judge, protocol): ``kind`` is the protocol family (consistency,
quality, editorial, ...), ``item`` one call of it (a category, a criterion, a sampled
section), ``protocol`` a key of everything the reply depends on (version, window, a digest
of the story text), so a changed story or window never reuses an old reply. An ``ok`` row is
final; a ``failed`` row is retried by the next run and counts its attempts. Nothing here
turns a failure into a number: readers decide what a missing reply excludes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from agent.store.errors import StoreError
from agent.store.runstore import RunStore

_COLUMNS = (
    "kind, item, judge, protocol, status, reply, error, meta, prompt_tokens, completion_tokens, "
    "latency_s, attempts, updated_at"
)


@dataclass(frozen=True)
class Judgment:
    kind: str
    item: str
    judge: str
    protocol: str
    status: str
    reply: Any
    error: str | None
    meta: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    attempts: int
    updated_at: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def from_row(cls, row: Any) -> Judgment:
        return cls(
            row["kind"],
            row["item"],
            row["judge"],
            row["protocol"],
            row["status"],
            json.loads(row["reply"]) if row["reply"] is not None else None,
            row["error"],
            json.loads(row["meta"]),
            row["prompt_tokens"],
            row["completion_tokens"],
            row["latency_s"],
            row["attempts"],
            row["updated_at"],
        )


def put(
    store: RunStore,
    *,
    kind: str,
    item: str,
    judge: str,
    protocol: str,
    reply: Any = None,
    error: str | None = None,
    meta: dict[str, Any] | None = None,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    latency_s: float = 0.0,
) -> Judgment:
    """Record one judgment: ``reply`` (ok) or ``error`` (failed), exactly one of them.

    An existing ``ok`` row is never replaced (a rerun must skip it); a ``failed`` row is
    replaced and its attempt count carried on.
    """
    if (reply is None) == (error is None):
        raise StoreError("a judgment has either a reply or an error")
    status = "ok" if reply is not None else "failed"
    reply_json = json.dumps(reply, ensure_ascii=False, sort_keys=True) if reply is not None else None
    meta_json = json.dumps(meta or {}, ensure_ascii=False, sort_keys=True)
    now = time.time()
    with store.db.write() as conn:
        row = conn.execute(
            "SELECT status, attempts FROM judgments WHERE kind = ? AND item = ? AND judge = ? AND protocol = ?",
            (kind, item, judge, protocol),
        ).fetchone()
        if row is not None and row["status"] == "ok":
            raise StoreError(f"judgment {kind}/{item} by {judge} is already recorded")
        attempts = (row["attempts"] + 1) if row is not None else 1
        conn.execute(
            "INSERT INTO judgments (kind, item, judge, protocol, status, reply, error, meta, prompt_tokens, "
            "completion_tokens, latency_s, attempts, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (kind, item, judge, protocol) DO UPDATE SET status = excluded.status, "
            "reply = excluded.reply, error = excluded.error, meta = excluded.meta, "
            "prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens, "
            "latency_s = excluded.latency_s, attempts = excluded.attempts, updated_at = excluded.updated_at",
            (
                kind,
                item,
                judge,
                protocol,
                status,
                reply_json,
                error,
                meta_json,
                prompt_tokens,
                completion_tokens,
                latency_s,
                attempts,
                now,
                now,
            ),
        )
    return Judgment(
        kind,
        item,
        judge,
        protocol,
        status,
        json.loads(reply_json) if reply_json else None,
        error,
        meta or {},
        prompt_tokens,
        completion_tokens,
        latency_s,
        attempts,
        now,
    )


def select(
    store: RunStore, kind: str, *, judge: str | None = None, protocol: str | None = None, item: str | None = None
) -> list[Judgment]:
    """Judgments of ``kind``, optionally narrowed, in a stable order."""
    sql = f"SELECT {_COLUMNS} FROM judgments WHERE kind = ?"
    params: list[Any] = [kind]
    for column, value in (("judge", judge), ("protocol", protocol), ("item", item)):
        if value is not None:
            sql += f" AND {column} = ?"
            params.append(value)
    return [Judgment.from_row(r) for r in store.query(sql + " ORDER BY judge, protocol, item", params)]


def missing(store: RunStore, kind: str, items: list[str], *, judge: str, protocol: str) -> list[str]:
    """The ``items`` that have no ``ok`` judgment yet (never tried, or failed): what a rerun does."""
    done = {j.item for j in select(store, kind, judge=judge, protocol=protocol) if j.ok}
    return [i for i in items if i not in done]
