"""The chapter loop: one chapter's tool conversation, from the prompt to ``finish``.

:class:`ChapterLoop` holds what one chapter has (its conversation, fitted to the context by
``agent.nst.chapter.sizing.ChapterBudget``; its state; its drafts) and what a tool may ask of it
(it implements ``agent.nst.chapter.tools.Chapter``, the tools' narrow interface), and drives it turn
by turn: each turn the model emits one tool call under the turn's grammar, the conversation only
grows by appending (except for the draft-retention rule) so each turn reuses the previous turn's
prefix in the server's cache, and ``max_turns`` bounds it: if no draft passed the gate by then, the
closest rejected draft is kept and the chapter is marked degraded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent.errors import FabulaError
from agent.language import language_line
from agent.llm import LLM, OutputValidationError, TruncatedOutputError
from agent.llm.budget import Budget, ContextExceededError
from agent.llm.roles import add_turn
from agent.llm.types import Completion, Message, ToolSpec
from agent.nst.chapter import native
from agent.nst.chapter.avoid import avoid_list
from agent.nst.chapter.drafter import Drafter, clean_prose
from agent.nst.chapter.ledger import ChapterLedger, Emit
from agent.nst.chapter.planned import Plan
from agent.nst.chapter.prompt import (
    NATIVE_SYSTEM,
    chapter_prompt,
    native_chapter_prompt,
    prose_request,
    system_prompt,
)
from agent.nst.chapter.rejected import Draft, DraftKeeper, reference_feedback
from agent.nst.chapter.sizing import MIN_TURN_OUTPUT, ChapterBudget, mostly_cjk, reference_budget
from agent.nst.chapter.tools import TOOLS, ChapterSession, ToolError, check_allowed, legal_tools, turn_grammar, unwrap
from agent.nst.chapter.update import ASK_AFTER_CAP, ASK_AFTER_EDIT, ASK_EVENT_AFTER_CAP, ASK_ONE_EVENT, update_state
from agent.nst.config import NstConfig
from agent.nst.consolidate import consolidate_one
from agent.nst.state import Applied, NarrativeState
from agent.store import RunStore
from agent.store.lineage.series import series, series_search
from agent.store.records import Chapter
from agent.store.search import Hit
from agent.store.writer.locks import locked
from agent.style.guide import prompt_block
from agent.text import count_words
from grammars.nst import EventUpdate, UpdateCall

__all__ = ["ChapterError", "ChapterLoop", "ChapterResult", "clean_prose"]


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


class ChapterLoop:
    """Runs one chapter: construct, then :meth:`run`; what it holds is what a tool may ask of the
    chapter in flight (``agent.nst.chapter.tools.Chapter``)."""

    def __init__(
        self,
        llm: LLM,
        store: RunStore,
        *,
        plan: Plan,
        story_prompt: str,
        state: NarrativeState,
        index: int,
        config: NstConfig,
        ratio: float,
        emit: Emit | None = None,
        budget: Budget | None = None,
    ) -> None:
        cfg = config
        self.llm, self.store, self.config = llm, store, cfg
        self.budget = budget or Budget(None)
        self.outline = plan.chapters
        self.story_prompt = story_prompt
        self.chapter = plan.chapter(index)
        self.gate = cfg.gate(self.chapter.target_words)
        self.drafter = Drafter.for_config(
            llm, self.gate, ratio, cfg, "nst_prose", budget=self.budget, shrink=self._shrink
        )
        self.state = state
        self.new_state: NarrativeState | None = None
        self.session: ChapterSession = ChapterSession.for_config(
            index, self.gate, cfg, tuple(state.future_requirements)
        )
        self.session.earlier_books = series(store) is not None
        self.room = ChapterBudget(self.budget, self.gate, cfg, self.session, lambda: self.drafter.ratio)
        self.abridged = False
        self.avoid = avoid_list(store, cfg, index)
        """The book's worst offenders so far, named in the task (``--lint-avoid``; empty when off)."""
        self.style_guide: dict[str, Any] | None = store.plans.get("style")
        self.style_parts = {"card": True, "exemplars": True}
        """What of the style guide the prompt still carries (exemplars give way first, then the card)."""
        self.out_of_room = False
        """A call did not fit the context: the chapter ended early (the cap's degraded path)."""
        self.last_update: Applied | None = None
        """What the last applied update did (``agent.nst.state.Applied``)."""
        self.ledger = ChapterLedger(store, self.session, emit)
        self.stats = self.ledger.stats
        self.messages: list[Message] = self._opening()
        self.drafts = DraftKeeper()
        self._arguments: dict[str, Any] = {}
        """The ledger arguments of the call in flight (the write tool adds its draft's facts)."""

    @property
    def ratio(self) -> float:
        return self.drafter.ratio

    @property
    def last_error(self) -> str | None:
        """Why the last recorded call failed, if it did."""
        return self.ledger.last_error

    # -- the prompt, fitted ------------------------------------------------------------------
    def _opening(self) -> list[Message]:
        cfg = self.config
        if cfg.tool_protocol == "native":
            return [
                {"role": "system", "content": NATIVE_SYSTEM},
                {
                    "role": "user",
                    "content": native_chapter_prompt(
                        story_prompt=self.story_prompt,
                        outline=self.outline,
                        state=self.state if cfg.state else None,
                        completed=self.session.index - 1,
                        chapter=self.chapter,
                        gate=self.gate,
                        lookback=self.session.lookback,
                        language=language_line(self.story_prompt, cfg),
                    ),
                },
            ]
        return [
            {
                "role": "system",
                "content": system_prompt(
                    with_state=cfg.state, evidence=cfg.evidence, notes=cfg.state_style == "reference"
                ),
            },
            {
                "role": "user",
                "content": chapter_prompt(
                    story_prompt=self.story_prompt,
                    outline=self.outline,
                    state=self.state if cfg.state else None,
                    completed=self.session.index - 1,
                    chapter=self.chapter,
                    gate=self.gate,
                    lookback=self.session.lookback,
                    abridged=self.abridged,
                    avoid=self.avoid,
                    style=self._style_block(),
                    language=language_line(self.story_prompt, cfg),
                    state_style=cfg.state_style,
                ),
            },
        ]

    def _style_block(self) -> str:
        if not self.style_guide:
            return ""
        return prompt_block(self.style_guide, self.chapter.as_json(), **self.style_parts)

    def fit_prompt(self) -> None:
        """Make the chapter prompt leave the chapter its working room (steps c, then d)."""
        self.room.fit_prompt(
            lambda: self.messages, lambda: self.state, self._digest, self._abridge, drop_style=self._drop_style
        )

    def _drop_style(self) -> str | None:
        """Give the style guide's room back, the exemplars first, then the card; the step's name, or None."""
        if not self.style_guide:
            return None
        for part in ("exemplars", "card"):
            if self.style_parts[part]:
                self.style_parts[part] = False
                self.messages = self._opening()
                return f"drop_style_{part}"
        return None

    def _digest(self) -> bool:
        digested = consolidate_one(
            self.llm,
            self.budget,
            self.state,
            self.session.index,
            arc_chapters=self.config.arc_chapters,
            max_tokens=self.config.digest_max_tokens,
            temperature=self.config.temperature,
        )
        if digested is None:
            return False
        self.state = digested
        self.messages = self._opening()
        return True

    def _abridge(self) -> bool:
        if self.abridged:
            return False
        self.abridged = True
        self.messages = self._opening()
        return True

    def _shrink(self) -> str | None:
        return self.room.shrink(self.messages, self.drafts)

    # -- what a tool may ask (agent.nst.chapter.tools.Chapter) -------------------------------------
    def committed(self, chapter: int) -> Chapter | None:
        return self.store.chapter(chapter)

    def read_window(self, text: str, offset: int, chapter: int) -> int:
        return self.room.read_window(self.messages, text, offset, chapter)

    def search(self, query: str) -> tuple[list[Hit], list[tuple[str, str]]]:
        hits = series_search(
            self.store, query, k=int(self.config.search_hits), before=self.session.index, style=self.config.search_style
        )
        events = self.state.find_events(query) if self.session.with_state and self.state.digests else []
        return hits, events

    def fit_lookup(self, passages: list[str]) -> list[str]:
        return self.room.fit_lookup(self.messages, passages)

    def correct(self, chapter: int, span: str, new: str, reason: str) -> None:
        if chapter in locked(self.store):  # approved by the writer (fabula reconcile --lock): never rewritten
            raise ToolError(f"chapter {chapter} is locked: the writer approved its text; it is not corrected")
        self.store.correct_chapter(chapter, span, new, reason=reason)

    # -- what the write and update tools do -------------------------------------------------
    def write_draft(self, title: str) -> str:
        """One draft of the chapter under the gate (the ``write`` tool)."""
        s = self.session
        self.messages.append({"role": "user", "content": prose_request(s.index, title, self.gate)})
        attempt = self.drafter.attempt(self.messages)
        self.ledger.count(attempt.reply)
        self.messages.append({"role": "assistant", "content": attempt.text})
        s.attempts += 1
        if self.stats["first_attempt_pass"] is None:
            self.stats["first_attempt_pass"] = attempt.accepted
        self._arguments.update(attempt.facts())
        self.ledger.event("draft", words=attempt.words, accepted=attempt.accepted)
        if attempt.accepted:
            s.accepted_title, s.accepted_text = title, attempt.text
            if self.config.retry_feedback == "reference":
                self._arguments["rejected_removed"] = self.drafts.settle(self.messages)
            return f"ACCEPTED: {attempt.words} words ({self.gate.describe()})."
        draft = Draft(
            title,
            attempt.text,
            attempt.words,
            attempt.truncated,
            self.gate.distance(attempt.words),
            len(self.messages) - 1,
        )
        kept = self._arguments["kept_in_context"] = self.drafts.reject(draft, self.messages)
        if self.config.retry_feedback == "reference" and attempt.repeated is None:
            return reference_feedback(attempt.words, self.gate, kept=kept, unended=attempt.unended)
        return attempt.feedback(self.gate)

    def apply_update(self, call: UpdateCall) -> str:
        """Apply the chapter's state transition per entry (the ``update`` tool, ``agent.nst.chapter.update``)."""
        base = self.new_state if self.new_state is not None else self.state
        applied, message = update_state(
            self.session, base, call, evidence=self.config.evidence, atomic=self.config.atomic_update
        )
        self.new_state = applied.state
        self.last_update = applied
        self._arguments["refused"] = applied.refused
        return message

    def native_reply(self) -> Completion:
        """One native turn's reply (``agent.nst.chapter.native``): every tool on offer, the chapter's
        dynamic budget, room for a whole draft inside a write call."""
        max_tokens = self._call_budget(self.config.tool_max_tokens)
        specs = native.tool_specs(self.session, self.gate, int(self.config.search_hits))
        return self._generate(
            self.messages, None, max_tokens, "nst_turn", min(max_tokens, self.drafter.min_output()), tools=specs
        )

    def _generate(
        self,
        messages: list[Message],
        output_type: Any,
        max_tokens: int,
        role: str,
        min_output: int,
        tools: list[ToolSpec] | None = None,
        ask_again_if_looped: bool = True,
    ) -> Completion:
        reply = self.budget.generate(
            self.llm,
            messages,
            output_type,
            temperature=self.config.temperature,
            max_tokens=max_tokens,
            min_output=min_output,
            role=role,
            what=f"a turn of chapter {self.session.index}",
            shrink=self._shrink,
            tools=tools,
            ask_again_if_looped=ask_again_if_looped,
        )
        self.ledger.count(reply)
        return reply

    def _out_of_room(self) -> bool:
        """A call of this chapter cannot fit even after everything gave way: end the chapter the
        way the turn cap does (True), unless nothing was drafted yet (False: the run stops)."""
        s = self.session
        if s.written and s.required() == ["finish"]:  # written and updated: what is left is optional
            self.budget.note("finish_without_turn", chapter=s.index)
            self.ledger.record(
                "finish", {"tool": "finish", "automatic": True, "budget": True}, "chapter finished", True
            )
            s.finished = True
            return True
        if s.written or self.drafts.best() is not None:
            self.budget.note("out_of_room", chapter=s.index, written=s.written, attempts=s.attempts)
            self.out_of_room = True
            return True
        return False

    def run(self) -> ChapterResult:
        if self.config.tool_protocol == "native":
            return self._run_native()
        s = self.session
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
            return self._result(s.accepted_title or self.chapter.title, s.accepted_text or "", degraded, reason)
        best = self.drafts.best()
        if best is None:
            raise ChapterError(f"chapter {s.index}: no draft was written in {s.max_turns} turns")
        s.accepted_title, s.accepted_text = best.title, best.text
        within = "before the context was full" if self.out_of_room else f"in {s.max_turns} turns"
        reason = (
            f"no draft passed the length gate {within} ({s.attempts} attempts); kept the "
            f"closest: {best.words} words for {self.gate.low}-{self.gate.high}"
            + (", cut off at the token limit" if best.truncated else "")
        )
        if s.with_state:
            self._fallback_update()
        return self._result(best.title, best.text, True, reason)

    def _run_native(self) -> ChapterResult:
        """The native protocol's turns (``agent.nst.chapter.native``): the chapter ends only on DONE after an
        accepted write (the update is the model's to call, as in the reference); at the turn cap, or when the
        context is full, the chapter is kept degraded, which the paper profile's ``chapter_restarts`` turns
        into a restart from the checkpoint."""
        s = self.session
        self.fit_prompt()
        while s.turn < s.max_turns and not s.finished:
            s.turn += 1
            try:
                native.take_turn(self)
            except ContextExceededError:
                if not (s.written or self.drafts.best() is not None):
                    raise
                self.out_of_room = True
                break
        self.stats["turns"] = s.turn
        within = "before the context was full" if self.out_of_room else f"in {s.max_turns} turns"
        if s.finished:
            return self._result(s.accepted_title or self.chapter.title, s.accepted_text or "", False, None)
        if s.written:
            return self._result(
                s.accepted_title or self.chapter.title,
                s.accepted_text or "",
                True,
                f"the model did not reply DONE {within}",
            )
        best = self.drafts.best()
        if best is None:
            raise ChapterError(f"chapter {s.index}: no draft was written in {s.max_turns} turns")
        reason = (
            f"no draft passed the length gate {within} ({s.attempts} attempts); kept the closest: "
            f"{best.words} words for {self.gate.low}-{self.gate.high}"
        )
        return self._result(best.title or self.chapter.title, best.text, True, reason)

    def _why_not_updated(self) -> str:
        s = self.session
        if self.out_of_room:
            return "state not updated: the context was full"
        if s.stuck:
            if s.failures_in_a_row == 1:
                return "state not updated: the update attempt failed"
            return f"state not updated: {s.failures_in_a_row} update attempts in a row failed"
        return f"state not updated within {s.max_turns} turns"

    def _result(self, title: str, text: str, degraded: bool, reason: str | None) -> ChapterResult:
        self.stats.update(
            attempts=self.session.attempts,
            reads=self.session.reads,
            searches=self.session.searches,
            corrects=self.session.corrects,
            failed_calls=self.session.failed,
            words=count_words(text),
            target=self.gate.target,
            degraded=degraded,
        )
        state = self.new_state if self.new_state is not None else (self.state if self.session.with_state else None)
        return ChapterResult(title.strip(), text, state, degraded, reason, self.ratio, self.stats)

    def _call_budget(self, ceiling: int) -> int:
        """A chapter call's ``max_tokens``: its setting, or the reference's dynamic budget under it."""
        overhead = self.config.turn_token_overhead
        if overhead is None:
            return ceiling
        return reference_budget(self.gate.target, overhead, ceiling, cjk=mostly_cjk(self.story_prompt))

    def _turn(self, tools: list[str]) -> None:
        s, cfg = self.session, self.config
        max_tokens = self._call_budget(cfg.update_max_tokens if "update" in tools else cfg.tool_max_tokens)
        floor = self.room.update_output() if "update" in tools else MIN_TURN_OUTPUT
        try:
            reply = self._generate(
                self.messages,
                turn_grammar(s, tools),
                max_tokens,
                "nst_turn",
                floor,
                ask_again_if_looped=cfg.ask_again_looped_update or tools != ["update"],
            )
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
        s = self.session
        s.turn = 1
        s.accepted_title, s.accepted_text = title, text
        self.fit_prompt()
        self.messages += [
            {"role": "assistant", "content": json.dumps({"tool": "write", "title": title})},
            {"role": "user", "content": prose_request(s.index, title, self.gate)},
            {"role": "assistant", "content": text},
            {"role": "user", "content": ask},
        ]
        return self._fallback_call(TOOLS["update"].grammar(s), self._call_budget(self.config.update_max_tokens))

    def _fallback_update(self) -> None:
        """Update calls past the cap, so the chapter kept still reaches the state: the full update
        first; if that is cut off or invalid, the one most important event alone (a bounded reply).
        Without ``fallback_full_update``, the one event only. None when ``fallback_update`` is off
        (the reference has no update past the turn cap)."""
        if not self.config.fallback_update:
            return
        if self.config.fallback_full_update:
            add_turn(self.messages, "user", ASK_AFTER_CAP)
            if self._fallback_call(
                TOOLS["update"].grammar(self.session), self._call_budget(self.config.update_max_tokens)
            ):
                return
            add_turn(self.messages, "user", ASK_ONE_EVENT)
        else:
            add_turn(self.messages, "user", ASK_EVENT_AFTER_CAP)
        # one event is a short reply: it may still fit where the full update did not
        self._fallback_call(EventUpdate, self._call_budget(self.config.update_max_tokens), MIN_TURN_OUTPUT)

    def _fallback_call(self, grammar: Any, max_tokens: int, min_output: int | None = None) -> bool:
        """One fallback update; True when it was applied."""
        self._arguments = {}
        try:
            reply = self._generate(
                self.messages,
                grammar,
                max_tokens,
                "nst_turn",
                min(max_tokens, min_output or self.room.update_output()),
                ask_again_if_looped=self.config.ask_again_looped_update,
            )
        except ContextExceededError as exc:
            self.budget.note("skip_fallback_update", chapter=self.session.index, error=str(exc)[:200])
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
        tools = legal_tools(self.session)
        left = self.session.turns_left()
        return f"Available now: {', '.join(tools)}. Turns left in this chapter: {left}."
