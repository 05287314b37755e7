"""The chapter loop: one chapter's tool conversation, from the prompt to ``finish``.

Each turn the model emits one tool call under the turn's grammar (``agent.nst.tools``: the
legal tools, their arguments narrowed); the conversation only grows by appending (except for
the draft-retention rule), so every turn reuses the previous turn's prefix in the server's
cache. The loop is bounded by ``max_turns``: if no draft passed the gate by then, the closest
rejected draft is kept and the chapter is marked degraded.

What the chapter holds and what a tool may ask of it is ``agent.nst.chapter.ChapterInFlight``;
every request fits the context: the chapter's share of it, and what gives way in which order,
is ``agent.nst.chapter_budget.ChapterBudget``'s (older arcs of past events digested, the outline
abridged, pages of reads, the retained draft dropped). The tools ask only what their
``Chapter`` protocol offers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent.errors import FabulaError
from agent.llm import OutputValidationError, TruncatedOutputError
from agent.llm.roles import add_turn
from agent.nst.budget import ContextExceededError
from agent.nst.chapter import ChapterInFlight
from agent.nst.chapter_budget import MIN_TURN_OUTPUT
from agent.nst.drafting import clean_prose
from agent.nst.prompts import prose_request
from agent.nst.state import NarrativeState
from agent.nst.tools import TOOLS, ToolError, check_allowed, legal_tools, turn_grammar, unwrap
from agent.nst.updating import ASK_AFTER_CAP, ASK_AFTER_EDIT, ASK_EVENT_AFTER_CAP, ASK_ONE_EVENT
from agent.text import count_words
from grammars.nst import EventUpdate, UpdateCall

__all__ = ["ChapterError", "ChapterInFlight", "ChapterLoop", "ChapterResult", "clean_prose"]


class ChapterError(FabulaError, RuntimeError):
    """The chapter produced no text at all within its bounds."""


@dataclass
class ChapterResult:
    title: str
    text: str
    state: NarrativeState | None
    degraded: bool
    reason: str | None
    ratio: float
    stats: dict[str, Any] = field(default_factory=dict)


class ChapterLoop(ChapterInFlight):
    """Runs one chapter: construct (see :class:`agent.nst.chapter.ChapterInFlight`), then :meth:`run`."""

    def _out_of_room(self) -> bool:
        """A call of this chapter cannot fit even after everything gave way: end the chapter the
        way the turn cap does (True), unless nothing was drafted yet (False: the run stops)."""
        s = self.s
        if s.written and s.required() == ["finish"]:  # written and updated: what is left is optional
            self.budget.note("finish_without_turn", chapter=s.index)
            self.ledger.record("finish", {"tool": "finish", "automatic": True, "budget": True}, "chapter finished",
                               True)
            s.finished = True
            return True
        if s.written or self.drafts.best() is not None:
            self.budget.note("out_of_room", chapter=s.index, written=s.written, attempts=s.attempts)
            self.out_of_room = True
            return True
        return False

    def run(self) -> ChapterResult:
        s = self.s
        self.fit_prompt()
        while s.turn < s.max_turns and not s.finished and not s.stuck:
            tools = legal_tools(s)
            if tools == ["finish"]:
                self.ledger.record("finish", {"tool": "finish", "automatic": True}, "chapter finished", True)
                s.finished = True
                break
            s.turn += 1
            try:
                self._turn(tools)
            except ContextExceededError:
                if not self._out_of_room():
                    raise
                break
        self.stats["turns"] = s.turn
        if s.written:
            degraded, reason = False, None
            if s.with_state and not s.updated:
                self._fallback_update()
                if not s.updated:
                    degraded, reason = True, self._why_not_updated()
            return self._result(s.accepted_title or self.item["title"], s.accepted_text or "", degraded, reason)
        best = self.drafts.best()
        if best is None:
            raise ChapterError(f"chapter {s.index}: no draft was written in {s.max_turns} turns")
        s.accepted_title, s.accepted_text = best.title, best.text
        within = "before the context was full" if self.out_of_room else f"in {s.max_turns} turns"
        reason = (f"no draft passed the length gate {within} ({s.attempts} attempts); kept the "
                  f"closest: {best.words} words for {self.gate.low}-{self.gate.high}"
                  + (", cut off at the token limit" if best.truncated else ""))
        if s.with_state:
            self._fallback_update()
        return self._result(best.title, best.text, True, reason)

    def _why_not_updated(self) -> str:
        s = self.s
        if self.out_of_room:
            return "state not updated: the context was full"
        if s.stuck:
            if s.failures_in_a_row == 1:
                return "state not updated: the update attempt failed"
            return f"state not updated: {s.failures_in_a_row} update attempts in a row failed"
        return f"state not updated within {s.max_turns} turns"

    def _result(self, title: str, text: str, degraded: bool, reason: str | None) -> ChapterResult:
        self.stats.update(attempts=self.s.attempts, reads=self.s.reads, searches=self.s.searches,
                          corrects=self.s.corrects, failed_calls=self.s.failed, words=count_words(text),
                          target=self.gate.target, degraded=degraded)
        state = self.new_state if self.new_state is not None else (self.state if self.s.with_state else None)
        return ChapterResult(title.strip(), text, state, degraded, reason, self.ratio, self.stats)

    def _turn(self, tools: list[str]) -> None:
        s, cfg = self.s, self.config
        max_tokens = cfg.update_max_tokens if "update" in tools else cfg.tool_max_tokens
        floor = self.room.update_output() if "update" in tools else MIN_TURN_OUTPUT
        try:
            reply = self._generate(self.messages, turn_grammar(s, tools), max_tokens, "nst_turn", floor)
        except (TruncatedOutputError, OutputValidationError) as exc:
            self.stats["invalid_turns"] += 1
            s.failed += 1
            self.ledger.record("invalid", {"offered": tools}, None, False, str(exc))
            s.note_turn(False, update_failed="update" in tools)
            if isinstance(exc, TruncatedOutputError) and self.budget.clamped:
                self.room.free_room_after_cut(self.messages, self.drafts, max_tokens)
            return
        call = unwrap(reply.parsed)
        self.messages.append({"role": "assistant", "content": reply.text.strip()})
        self.stats["tools"][call.tool] = self.stats["tools"].get(call.tool, 0) + 1
        self._arguments = arguments = call.model_dump()
        try:
            if call.tool not in tools:  # offered this turn = allowed (s.turn already counts this turn)
                check_allowed(s, call.tool)
            result = TOOLS[call.tool].run(self, call)
            ok, error = True, None
        except ToolError as exc:
            s.failed += 1
            result, ok, error = f"ERROR: {exc}", False, str(exc)
        self.ledger.record(call.tool, arguments, result, ok, error)
        s.note_turn(ok, update_failed=call.tool == "update")
        if not s.finished:
            add_turn(self.messages, "user", f"{result}\n\n{self._next_hint()}")

    def update_from_text(self, title: str, text: str, ask: str = ASK_AFTER_EDIT) -> bool:
        """One update call for chapter text that already exists (``fabula edit``: the writer's
        edited text; ``fabula derive``: an imported book's chapter, asked with ``ask``): the
        chapter's prompt from the state before it (fitted as for writing it), the text as the
        accepted draft, then the update through the path every chapter's update takes (the same
        grammar, evidence checked against ``text``, recorded in the ledger). True when the update
        applied; the new state is then :attr:`new_state`."""
        s = self.s
        s.turn = 1
        s.accepted_title, s.accepted_text = title, text
        self.fit_prompt()
        self.messages += [{"role": "assistant", "content": json.dumps({"tool": "write", "title": title})},
                          {"role": "user", "content": prose_request(s.index, title, self.gate)},
                          {"role": "assistant", "content": text},
                          {"role": "user", "content": ask}]
        return self._fallback_call(TOOLS["update"].grammar(s), self.config.update_max_tokens)

    def _fallback_update(self) -> None:
        """Update calls past the cap, so the chapter kept still reaches the state: the full update
        first; if that is cut off or invalid, the one most important event alone (a bounded reply).
        Without ``fallback_full_update``, the one event only. None when ``fallback_update`` is off
        (the reference has no update past the turn cap)."""
        if not self.config.fallback_update:
            return
        if self.config.fallback_full_update:
            add_turn(self.messages, "user", ASK_AFTER_CAP)
            if self._fallback_call(TOOLS["update"].grammar(self.s), self.config.update_max_tokens):
                return
            add_turn(self.messages, "user", ASK_ONE_EVENT)
        else:
            add_turn(self.messages, "user", ASK_EVENT_AFTER_CAP)
        # one event is a short reply: it may still fit where the full update did not
        self._fallback_call(EventUpdate, self.config.update_max_tokens, MIN_TURN_OUTPUT)

    def _fallback_call(self, grammar: Any, max_tokens: int, min_output: int | None = None) -> bool:
        """One fallback update; True when it was applied."""
        self._arguments = {}
        try:
            reply = self._generate(self.messages, grammar, max_tokens, "nst_turn",
                                   min(max_tokens, min_output or self.room.update_output()))
        except ContextExceededError as exc:
            self.budget.note("skip_fallback_update", chapter=self.s.index, error=str(exc)[:200])
            self.ledger.last_error = str(exc)
            return False
        except (TruncatedOutputError, OutputValidationError) as exc:
            self.ledger.record("invalid", {"offered": ["update"], "fallback": True}, None, False, str(exc))
            return False
        self.messages.append({"role": "assistant", "content": reply.text})
        call = reply.parsed if isinstance(reply.parsed, UpdateCall) else reply.parsed.as_update()
        try:
            result, ok, error = self.apply_update(call), True, None
        except ToolError as exc:
            result, ok, error = f"ERROR: {exc}", False, str(exc)
        self.ledger.record("update", {**call.model_dump(), **self._arguments, "fallback": True}, result, ok, error)
        if not ok:
            add_turn(self.messages, "user", result)
        return ok

    def _next_hint(self) -> str:
        tools = legal_tools(self.s)
        left = self.s.turns_left()
        return f"Available now: {', '.join(tools)}. Turns left in this chapter: {left}."
