"""A batch folder read for listing (``fabula runs``, ``fabula view``): its stories and how far each
got, from ``DIR/batch.db``, opened read-only (the batch's own reader and writer is
:mod:`agent.batch.store`; this reads the same table without importing the batch layer)."""

from __future__ import annotations

import os
import socket
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent.store.db import connect

BATCH_DB = "batch.db"
SHOWN = ("completed", "running", "failed", "pending", "stopped")
"""The counts a listing shows, in order (``interrupted`` is counted as stopped)."""


@dataclass(frozen=True)
class BatchStory:
    key: str
    run_dir: str
    status: str
    words: int
    target_words: int
    units: int
    target_units: int | None
    tokens: int
    error: str | None


@dataclass
class BatchSummary:
    """One batch: its pipeline, per status how many stories, words of the target, tokens."""

    pipeline: str
    stories: list[BatchStory] = field(default_factory=list)
    error: str | None = None

    @property
    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(SHOWN, 0)
        for story in self.stories:
            out["stopped" if story.status not in out else story.status] += 1
        return out

    @property
    def words(self) -> int:
        return sum(s.words for s in self.stories)

    @property
    def target_words(self) -> int:
        return sum(s.target_words for s in self.stories)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.stories)

    def version(self) -> str:
        """Changes whenever a story's row does (the view's live update)."""
        return ",".join(f"{s.key}:{s.status}:{s.words}:{s.units}:{s.tokens}" for s in self.stories)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "counts": self.counts,
            "words": self.words,
            "target_words": self.target_words,
            "tokens": self.tokens,
            "error": self.error,
            "stories": [asdict(s) for s in self.stories],
        }


def is_batch(folder: Path) -> bool:
    return (folder / BATCH_DB).is_file()


def read_batch(folder: Path) -> BatchSummary:
    """The batch in ``folder`` (never written to); a damaged database gives a summary with ``error``."""
    try:
        conn = connect(folder / BATCH_DB, readonly=True)
    except sqlite3.Error as exc:
        return BatchSummary("?", error=f"unreadable batch database: {exc}")
    try:
        pipeline = conn.execute("SELECT pipeline FROM batch WHERE id = 1").fetchone()[0]
        rows = conn.execute(
            "SELECT key, run_dir, status, words, target_words, units, target_units, prompt_tokens, "
            "completion_tokens, error, pid, host FROM stories ORDER BY seq"
        ).fetchall()
    except (sqlite3.Error, TypeError) as exc:
        return BatchSummary("?", error=f"unreadable batch database: {exc}")
    finally:
        conn.close()
    stories = [
        BatchStory(
            str(r["key"]),
            str(r["run_dir"]),
            _live(r["status"], r["pid"], r["host"]),
            int(r["words"]),
            int(r["target_words"]),
            int(r["units"]),
            r["target_units"],
            int(r["prompt_tokens"]) + int(r["completion_tokens"]),
            r["error"],
        )
        for r in rows
    ]
    return BatchSummary(str(pipeline), stories)


def _live(status: str, pid: int | None, host: str | None) -> str:
    """``running`` in a process that is gone (on this machine) reads ``interrupted``, as ``batch show`` says."""
    if status != "running" or host != socket.gethostname() or not pid:
        return status
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "interrupted"
    except PermissionError:
        pass
    return status


def summary_line(summary: BatchSummary) -> str:
    """``3 completed, 1 running, 0 failed, 2 pending, 0 stopped · 1234/40000 words · 56k tokens``."""
    if summary.error:
        return summary.error
    counts = ", ".join(f"{n} {status}" for status, n in summary.counts.items())
    return f"{counts} · {summary.words}/{summary.target_words} words · {summary.tokens} tokens"
