"""Progress on the terminal, from the run's events (``agent.run_context.Event``).

On a terminal: one live line, rewritten at every model call, in words a writer knows
("planning the outline", "chapter 3/10: searching", "chapter 3/10: draft 2, 640 words, too
long"), with words written of the target, calls, tokens and an ETA; the line is fitted to the
terminal's width (the least useful parts go first, then it is cut), so it never wraps and never
leaves stale lines. A kept line at every committed unit. Otherwise (a log, CI): plain lines in
full, one per committed unit and planner stage, and at most one call line every
``PLAIN_EVERY_S`` seconds, so a long unit still shows that it is alive. ``verbose`` keeps every
call's line; ``quiet`` draws nothing.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import TextIO

from agent import pipelines
from agent.run_context import Event

PLAIN_EVERY_S = 15.0
VERBOSE = False
"""Every display's ``verbose`` unless it is given: the command line's ``-v`` (set by ``agent.cli.main``)."""

ROLE_WORDS = {"prompt": "answering"}
"""What a model call of a role no pipeline owns is doing; each pipeline's own roles are worded
in its record (``Pipeline.progress``), see :func:`role_words`."""
_ROLE_WORDS: dict[str, str] = {}


def role_words() -> dict[str, str]:
    """What a model call of each role is doing, as a writer would say it: every pipeline's
    vocabulary, then the roles no pipeline owns."""
    if not _ROLE_WORDS:
        for name in pipelines.names():
            _ROLE_WORDS.update(pipelines.get(name).progress)
        _ROLE_WORDS.update(ROLE_WORDS)
    return _ROLE_WORDS


TOOL_WORDS = {
    "read": "reading back",
    "search": "searching",
    "write": "writing",
    "correct": "correcting",
    "update": "updating the story state",
    "finish": "finishing the chapter",
    "budget": "fitting the context",
}
"""What each NstAgent tool is doing."""


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _count(n: int) -> str:
    """1234 -> 1.2k, 1234567 -> 1.2M (token counts on the live line)."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n // 1000}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)


def terminal_width(stream: TextIO) -> int:
    """Columns of the terminal ``stream`` writes to (``COLUMNS`` first, 80 when unknown)."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return shutil.get_terminal_size((80, 24)).columns


def fit(parts: list[str], width: int, sep: str = "  ") -> str:
    """Join ``parts`` (most important first) within ``width - 1`` columns: drop parts from the
    end while they do not fit, then cut the first one with an ellipsis."""
    room = max(width - 1, 10)
    kept = [p for p in parts if p]
    while len(kept) > 1 and len(sep.join(kept)) > room:
        kept.pop()
    line = sep.join(kept)
    return line if len(line) <= room else line[: room - 1] + "…"


def step_line(event: Event, internals: bool = False) -> str:
    """A committed timestep (Magnet and its single-model baseline): its words of the target and time, a
    new goal on a second line; with ``internals`` (-v) also what the step did (the actions selected,
    critic revisions, world commits, failed calls) and its tokens."""
    d = event.data
    line = f"step {d['step']:>3}  {event.words}/{event.target_words} words"
    if not internals:
        line += f"  {d['wall_s']:.1f}s"
    elif "selected" in d:
        line += (
            f"  selected {','.join(d['selected'])}  revisions {d['revisions']}"
            + (f" ({d['capped']} capped)" if d.get("capped") else "")
            + f"  commits {d['commits']}"
            + (f"  failed calls {d['failed_calls']}" if d.get("failed_calls") else "")
        )
    if internals:
        line += f"  tokens {event.prompt_tokens}+{event.completion_tokens}  {d['wall_s']:.1f}s"
    goal = d.get("goal")
    if goal:
        text = goal["text"]
        line += f"\n      goal ({goal['kind']}): {text if len(text) <= 100 else text[:97] + '...'}"
    return line


class ProgressDisplay:
    """An event sink that draws progress on ``stream`` (stderr by default)."""

    def __init__(
        self,
        *,
        quiet: bool = False,
        verbose: bool | None = None,
        unit_name: str = "chapter",
        stream: TextIO | None = None,
        tty: bool | None = None,
        width: int | None = None,
    ) -> None:
        self.quiet = quiet
        self.verbose = VERBOSE if verbose is None else verbose
        self.unit_name = unit_name
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.width = width
        self._last_plain = 0.0

    def __call__(self, event: Event) -> None:
        if self.quiet:
            return
        if event.kind == "plan":
            self._line([f"planning the {event.detail}" if event.detail else "planning"], keep=True)
        elif event.kind == "committed":
            flag = " (degraded)" if event.data.get("degraded") else ""
            text = event.detail or (
                step_line(event, self.verbose)
                if "step" in event.data
                else f"{self._unit(event)} written ({event.data.get('words')} words){flag}"
            )
            self._line([text, *self._totals(event, self.verbose)], keep=True)
        elif event.kind == "note":
            self._line([str(event.detail)], keep=True, fitted=False)
        elif event.kind in ("call", "draft", "tool", "unit"):
            now = time.monotonic()
            if not self.tty and not self.verbose and now - self._last_plain < PLAIN_EVERY_S:
                return
            self._last_plain = now
            unit = self._unit(event)
            doing = self._doing(event)
            head = f"{unit}: {doing}" if unit else doing
            self._line([head, *self._totals(event, self.verbose)], keep=not self.tty or self.verbose)

    def _unit(self, event: Event) -> str:
        if event.unit is None or event.unit == 0:
            return ""
        of = f"/{event.units}" if event.units else ""
        return f"{self.unit_name} {event.unit}{of}"

    @staticmethod
    def _doing(event: Event) -> str:
        if event.kind == "call":
            role = event.detail or "call"
            words = role_words().get(role) or ("judging" if role.startswith("judge") else role.replace("_", " "))
            return words + (" (the call failed, retrying)" if event.data.get("failed") else "")
        if event.kind == "draft":
            verdict = "accepted" if event.data.get("accepted") else "rejected"
            number = event.data.get("attempts")
            return (f"draft {number}" if number else "draft") + f", {event.data.get('words')} words, {verdict}"
        if event.kind == "tool":
            words = TOOL_WORDS.get(str(event.detail), str(event.detail))
            return words + ("" if event.data.get("ok") else " (refused)")
        return "starting"

    @staticmethod
    def _totals(event: Event, internals: bool = False) -> list[str]:
        """The figures after the activity, most useful first (the last ones go first on a narrow terminal):
        words of the target, ETA and time for a writer; the model calls and tokens with ``internals`` (-v)."""
        target = f"/{event.target_words}" if event.target_words else ""
        figures = [f"{event.words}{target} words", f"ETA {_duration(event.eta_s)}"]
        if internals:
            tokens = event.prompt_tokens + event.completion_tokens
            cached = (
                f" ({100 * event.cached_prompt_tokens / event.prompt_tokens:.0f}% cached)"
                if event.prompt_tokens
                else ""
            )
            figures += [f"{event.calls} calls", f"{_count(tokens)} tokens{cached}"]
        return [*figures, f"{_duration(event.elapsed_s)} elapsed"]

    def _line(self, parts: list[str], *, keep: bool, fitted: bool = True) -> None:
        if self.tty:
            text = fit(parts, self.width or terminal_width(self.stream)) if fitted else "  ".join(parts)
            self.stream.write("\r\033[K" + text + ("\n" if keep else ""))
        else:
            self.stream.write("  ".join(p for p in parts if p) + "\n")
        self.stream.flush()


class BatchDisplay:
    """A batch's progress (``agent.batch.tracker.Update``): one live line across every story
    (stories done/running/failed, words of the target, tokens/s, ETA), fitted to the terminal,
    a kept line when a story ends; plain lines in a log, at most one every ``PLAIN_EVERY_S``
    between stories' ends."""

    def __init__(
        self,
        *,
        quiet: bool = False,
        verbose: bool | None = None,
        stream: TextIO | None = None,
        tty: bool | None = None,
        width: int | None = None,
    ) -> None:
        self.lines = ProgressDisplay(quiet=quiet, verbose=verbose, stream=stream, tty=tty, width=width)
        self._last_plain = 0.0

    def __call__(self, update) -> None:
        if self.lines.quiet:
            return
        if update.kind == "note":
            self.lines._line([str(update.detail)], keep=True, fitted=False)
        elif update.kind == "ended":
            error = f": {update.detail}" if update.detail else ""
            self.lines._line([f"story {update.key} {update.status}{error}", *self.parts(update.snapshot)], keep=True)
        elif update.kind in ("event", "started"):
            now = time.monotonic()
            if not self.lines.tty and now - self._last_plain < PLAIN_EVERY_S:
                return
            self._last_plain = now
            self.lines._line(["batch", *self.parts(update.snapshot)], keep=not self.lines.tty)

    @staticmethod
    def parts(s) -> list[str]:
        failed = f", {s.failed} failed" if s.failed else ""
        rate = f"{s.tokens_per_s:.1f} tok/s" if s.tokens_per_s else ""
        return [
            f"{s.completed}/{s.total} stories done, {s.running} running{failed}",
            f"{s.words}/{s.target_words} words",
            f"ETA {_duration(s.eta_s)}",
            rate,
            f"{s.calls} calls",
            f"{_duration(s.elapsed_s)} elapsed",
        ]

    @classmethod
    def totals(cls, s) -> str:
        return ", ".join(p for p in cls.parts(s) if p)
