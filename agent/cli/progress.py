"""Progress on the terminal, from the run's events (``agent.run_context.Event``).

On a terminal: one live line, rewritten at every model call (unit, role or tool, tokens so far,
words written of the target, ETA), and a kept line at every committed unit. Otherwise (a log,
CI): plain lines, one per committed unit and planner stage, and at most one call line every
``PLAIN_EVERY_S`` seconds, so a long unit still shows that it is alive.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from agent.run_context import Event

PLAIN_EVERY_S = 15.0


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


class ProgressDisplay:
    """An event sink that draws progress on ``stream`` (stderr by default)."""

    def __init__(self, *, quiet: bool = False, unit_name: str = "chapter", stream: TextIO | None = None,
                 tty: bool | None = None) -> None:
        self.quiet = quiet
        self.unit_name = unit_name
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._last_plain = 0.0

    def __call__(self, event: Event) -> None:
        if self.quiet:
            return
        if event.kind == "plan":
            self._line(f"planning: {event.detail}", keep=True)
        elif event.kind == "committed":
            flag = " DEGRADED" if event.data.get("degraded") else ""
            text = event.detail or f"{self._unit(event)} committed: {event.data.get('words')} words{flag}"
            self._line(f"{text}  [{self._totals(event)}]", keep=True)
        elif event.kind == "note":
            self._line(str(event.detail), keep=True)
        elif event.kind in ("call", "draft", "tool", "unit"):
            now = time.monotonic()
            if not self.tty and now - self._last_plain < PLAIN_EVERY_S:
                return
            self._last_plain = now
            self._line(f"{self._unit(event)}  {self._doing(event)}  [{self._totals(event)}]", keep=not self.tty)

    def _unit(self, event: Event) -> str:
        if event.unit is None or event.unit == 0:
            return "plan"
        of = f"/{event.units}" if event.units else ""
        return f"{self.unit_name} {event.unit}{of}"

    @staticmethod
    def _doing(event: Event) -> str:
        if event.kind == "call":
            return f"{event.detail or 'call'} done" + (" (failed)" if event.data.get("failed") else "")
        if event.kind == "draft":
            verdict = "accepted" if event.data.get("accepted") else "rejected"
            return f"draft {event.data.get('words')} words {verdict}"
        if event.kind == "tool":
            return f"{event.detail} {'ok' if event.data.get('ok') else 'failed'}"
        return "started"

    @staticmethod
    def _totals(event: Event) -> str:
        target = f"/{event.target_words}" if event.target_words else ""
        cached = f" ({100 * event.cached_prompt_tokens / event.prompt_tokens:.0f}% cached)" \
            if event.prompt_tokens else ""
        return (f"{event.words}{target} words, {event.calls} calls, {event.prompt_tokens}+{event.completion_tokens} "
                f"tokens{cached}, {_duration(event.elapsed_s)} elapsed, ETA {_duration(event.eta_s)}")

    def _line(self, text: str, *, keep: bool) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text + ("\n" if keep else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


class BatchDisplay:
    """A batch's progress (``agent.batch.tracker.Update``): one live line across every story
    (stories done/running/failed, words of the target, tokens/s, ETA), a kept line when a story
    ends; plain lines in a log, at most one every ``PLAIN_EVERY_S`` between stories' ends."""

    def __init__(self, *, quiet: bool = False, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.lines = ProgressDisplay(quiet=quiet, stream=stream, tty=tty)
        self._last_plain = 0.0

    def __call__(self, update) -> None:
        if self.lines.quiet:
            return
        if update.kind == "note":
            self.lines._line(str(update.detail), keep=True)
        elif update.kind == "ended":
            error = f": {update.detail}" if update.detail else ""
            self.lines._line(f"story {update.key} {update.status}{error}  [{self.totals(update.snapshot)}]", keep=True)
        elif update.kind in ("event", "started"):
            now = time.monotonic()
            if not self.lines.tty and now - self._last_plain < PLAIN_EVERY_S:
                return
            self._last_plain = now
            self.lines._line(f"batch  [{self.totals(update.snapshot)}]", keep=not self.lines.tty)

    @staticmethod
    def totals(s) -> str:
        rate = f"{s.tokens_per_s:.1f} tok/s" if s.tokens_per_s else "- tok/s"
        failed = f", {s.failed} failed" if s.failed else ""
        return (f"{s.completed}/{s.total} done, {s.running} running{failed}; {s.words}/{s.target_words} words, "
                f"{s.calls} calls, {rate}, {_duration(s.elapsed_s)} elapsed, ETA {_duration(s.eta_s)}")
