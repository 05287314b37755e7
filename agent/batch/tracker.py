"""Progress across a batch: every story's run events folded into one picture.

Each story's run emits the usual events (``agent.run_context.Event``, cumulative for that run's
session); the tracker keeps the latest per story and turns them into batch figures: stories
done, running, failed; words written of the batch's target; completion tokens per second and an
ETA, both measured over this session. Called from the stories' threads, so it holds a lock; the
sink (the CLI's display) is called under it, one update at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.batch.store import StoryRow
from agent.run_context import Event


@dataclass(frozen=True)
class Snapshot:
    """The batch at one moment (tokens, calls and rates count this session only)."""

    total: int
    completed: int
    running: int
    failed: int
    stopped: int
    pending: int
    words: int
    target_words: int
    words_this_session: int
    calls: int
    completion_tokens: int
    prompt_tokens: int
    cached_prompt_tokens: int
    elapsed_s: float
    tokens_per_s: float | None
    eta_s: float | None


@dataclass(frozen=True)
class Update:
    """What the sink is told. ``kind``: event (a story's run event), started, ended, note."""

    kind: str
    snapshot: Snapshot
    key: str | None = None
    event: Event | None = None
    status: str | None = None
    detail: str | None = None
    """An ended story's error, or a note's text."""


Sink = Callable[[Update], None]


class Tracker:
    """Folds story events into :class:`Snapshot` s and hands each update to ``sink``."""

    def __init__(self, stories: Sequence[StoryRow], sink: Sink | None = None) -> None:
        self._lock = threading.Lock()
        self._sink = sink
        self._started = time.monotonic()
        self._status = {s.key: ("pending" if s.status in ("running", "stopped") else s.status) for s in stories}
        self._words = {s.key: s.words for s in stories}
        self._targets = {s.key: s.target_words for s in stories}
        self._words_at_start = sum(self._words.values())
        self._events: dict[str, Event] = {}
        """The latest event of each story's run (its figures are cumulative over that run's session)."""

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> Snapshot:
        counts = {
            k: sum(1 for s in self._status.values() if s == k)
            for k in ("completed", "running", "failed", "stopped", "pending")
        }
        words = sum(self._words.values())
        calls = sum(e.calls for e in self._events.values())
        completion = sum(e.completion_tokens for e in self._events.values())
        prompt = sum(e.prompt_tokens for e in self._events.values())
        cached = sum(e.cached_prompt_tokens for e in self._events.values())
        elapsed = time.monotonic() - self._started
        done = words - self._words_at_start
        left = sum(max(0, self._targets[k] - self._words[k]) for k, s in self._status.items() if s != "completed")
        eta = left / (done / elapsed) if done > 0 and elapsed > 0 else None
        return Snapshot(
            len(self._status),
            counts["completed"],
            counts["running"],
            counts["failed"],
            counts["stopped"],
            counts["pending"],
            words,
            sum(self._targets.values()),
            done,
            calls,
            completion,
            prompt,
            cached,
            elapsed,
            completion / elapsed if elapsed > 0 and completion else None,
            eta,
        )

    def _tell(self, update_kind: str, **fields: object) -> None:
        if self._sink is not None:
            self._sink(Update(update_kind, self._snapshot(), **fields))  # type: ignore[arg-type]

    def started(self, key: str) -> None:
        with self._lock:
            self._status[key] = "running"
            self._tell("started", key=key)

    def event(self, key: str, event: Event) -> None:
        with self._lock:
            self._events[key] = event
            self._words[key] = max(self._words[key], event.words)  # 0 until the runner reports its progress
            self._tell("event", key=key, event=event)

    def ended(self, key: str, status: str, words: int, error: str | None = None) -> None:
        with self._lock:
            self._status[key] = status
            self._words[key] = words
            self._tell("ended", key=key, status=status, detail=error)

    def note(self, text: str) -> None:
        with self._lock:
            self._tell("note", detail=text)
