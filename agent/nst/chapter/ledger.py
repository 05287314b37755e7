"""What a chapter records as it goes: each tool call in the run's ledger (and as a progress
event), and the chapter's statistics (calls, tokens, tools, attempts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.llm.types import Completion
from agent.nst.chapter.tools import ChapterSession
from agent.store import RunStore

LEDGER_RESULT_CHARS = 4000

Emit = Callable[..., None]


class ChapterLedger:
    """The chapter's records: ``stats`` (returned with the chapter) and the ledger's tool calls."""

    def __init__(self, store: RunStore, session: ChapterSession, emit: Emit | None) -> None:
        self.store, self.s, self.emit = store, session, emit
        self.last_error: str | None = None
        """Why the last recorded call failed, if it did."""
        self.stats: dict[str, Any] = {
            "turns": 0,
            "attempts": 0,
            "first_attempt_pass": None,
            "invalid_turns": 0,
            "failed_calls": 0,
            "tools": {},
            "prompt_tokens": 0,
            "cached_prompt_tokens": 0,
            "completion_tokens": 0,
            "calls": 0,
        }

    def count(self, reply: Completion) -> None:
        usage = reply.usage
        self.stats["calls"] += 1
        self.stats["prompt_tokens"] += usage.prompt_tokens
        self.stats["cached_prompt_tokens"] += usage.cached_prompt_tokens
        self.stats["completion_tokens"] += usage.completion_tokens

    def record(
        self, tool: str, arguments: dict[str, Any], result: str | None, ok: bool, error: str | None = None
    ) -> None:
        self.last_error = None if ok else (error or "failed")
        if result is not None and len(result) > LEDGER_RESULT_CHARS:
            result = result[:LEDGER_RESULT_CHARS] + f"... [{len(result)} characters]"
        self.store.ledger.record_tool_call(
            turn=self.s.turn, tool=tool, arguments=arguments, result=result, ok=ok, error=error
        )
        self.event("tool", tool=tool, ok=ok)

    def event(self, kind: str, **data: Any) -> None:
        if self.emit is not None:
            self.emit(kind, data.get("tool"), turn=self.s.turn, attempts=self.s.attempts, **data)
