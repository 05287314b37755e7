"""Plain read-side records of what the store holds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


def stored_json(raw: Any, what: str) -> Any:
    """A JSON column as written by fabula; a hand-damaged one is a one-line damaged-database error."""
    from agent.store.errors import NotARunError

    try:
        return json.loads(raw)
    except (TypeError, ValueError, RecursionError) as exc:
        raise NotARunError(
            f"the run database is damaged: its {what} is not JSON ({type(exc).__name__}: {str(exc)[:80]})"
        ) from None


def stored_text(raw: Any, what: str = "a text column") -> str:
    """A text column as a string. fabula writes only text there: a column damaged into binary bytes
    (a BLOB) is a one-line damaged-database error, never shown as mojibake with success."""
    from agent.store.errors import NotARunError

    if isinstance(raw, str):
        return raw
    if isinstance(raw, bytes | bytearray | memoryview):
        raise NotARunError(
            f"the run database is damaged: {what} holds binary data, not text "
            f"({len(bytes(raw))} bytes); restore the run from a copy (fabula export --format db)"
        )
    return "" if raw is None else str(raw)


@dataclass(frozen=True)
class RunInfo:
    """The run row: what was asked for, with what, and how far it got."""

    pipeline: str
    unit_kind: str
    config: dict[str, Any]
    fingerprint: str
    model: str | None
    backend: str | None
    status: str
    error: str | None
    target_units: int | None
    last_unit: int
    created_at: float
    updated_at: float
    finished_at: float | None

    @classmethod
    def from_row(cls, row: Any) -> RunInfo:
        return cls(
            row["pipeline"],
            row["unit_kind"],
            stored_json(row["config"], "run configuration"),
            row["fingerprint"],
            row["model"],
            row["backend"],
            row["status"],
            row["error"],
            row["target_units"],
            row["last_unit"],
            row["created_at"],
            row["updated_at"],
            row["finished_at"],
        )


@dataclass(frozen=True)
class Chapter:
    index: int
    title: str
    text: str
    words: int
    version: int
    degraded: bool
    degraded_reason: str | None

    @classmethod
    def from_row(cls, row: Any) -> Chapter:
        return cls(
            row["idx"],
            stored_text(row["title"], f"chapter {row['idx']}'s title"),
            stored_text(row["text"], f"chapter {row['idx']}'s text"),
            row["words"],
            row["version"],
            bool(row["degraded"]),
            row["degraded_reason"],
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "title": self.title,
            "text": self.text,
            "words": self.words,
            "version": self.version,
            "degraded": self.degraded,
            "degraded_reason": self.degraded_reason,
        }


@dataclass(frozen=True)
class Paragraph:
    step: int
    seq: int
    kind: str
    text: str
    words: int

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.step, "seq": self.seq, "kind": self.kind, "text": self.text, "words": self.words}


@dataclass(frozen=True)
class ToolCall:
    unit: int
    turn: int
    tool: str
    arguments: Any
    result: str | None
    ok: bool
    error: str | None
