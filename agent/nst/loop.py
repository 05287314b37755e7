"""The chapter loop: one chapter's tool conversation, from the prompt to ``finish``.

Each turn the model emits one tool call under the turn's grammar (``agent.nst.tools``: the
legal tools, their arguments narrowed); the conversation only grows by appending (except for
the draft-retention rule), so every turn reuses the previous turn's prefix in the server's
cache. The loop is bounded by ``max_turns``: if no draft passed the gate by then, the closest
rejected draft is kept and the chapter is marked degraded.

Every request fits the context (``agent.nst.budget``). Before the first turn the chapter prompt
must leave the chapter room to work (a draft, the accepted text and its update); if it does not,
older arcs of past events are digested (``agent.nst.consolidate``, step c) and then the outline
is abridged to the acts around this chapter (step d). During the chapter a read returns the
page that fits (step a, ``tools.Read``) and a call that would not fit drops the retained
rejected draft (step b), then earlier read results. Each step is recorded in the ledger.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.errors import FabulaError
from agent.gate import Gate
from agent.llm import LLM, OutputValidationError, TruncatedOutputError
from agent.llm.types import Completion, Message
from agent.nst import room
from agent.nst.budget import Budget, ContextExceededError
from agent.nst.config import NstConfig
from agent.nst.consolidate import consolidate_one
from agent.nst.drafting import Drafter, clean_prose
from agent.nst.drafts import Draft, DraftKeeper, placeholder
from agent.nst.length import size_tokens
from agent.nst.prompts import chapter_prompt, prose_request, system_prompt
from agent.nst.state import NarrativeState, UpdateError, describe_update
from agent.nst.tools import TOOLS, ChapterSession, ToolError, check_allowed, legal_tools, turn_grammar, unwrap
from agent.store import RunStore
from agent.text import count_words
from grammars.nst import EventUpdate, UpdateCall

Emit = Callable[..., None]
LEDGER_RESULT_CHARS = 4000
MIN_TURN_OUTPUT = 128
MIN_READ_PAGE = 200
READ_PAGE_SHARE = 16
READ_REMOVED = "[lookup result removed to make room in the context; look it up again if needed]"
LOOKUP_RESULT = re.compile(r"^(Chapter \d+: |\d+ passage\(s\) for )")

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
    """Runs one chapter. Construct, then :meth:`run`."""

    def __init__(self, llm: LLM, store: RunStore, *, plan: dict[str, Any], story_prompt: str,
                 state: NarrativeState, index: int, config: NstConfig | Mapping[str, Any], ratio: float,
                 emit: Emit | None = None, budget: Budget | None = None) -> None:
        cfg = NstConfig.coerce(config) if not isinstance(config, NstConfig) else config
        self.llm, self.store, self.config = llm, store, cfg
        self.budget = budget or Budget(None)
        self.outline = plan["outline"]
        self.story_prompt = story_prompt
        self.item = self.outline[index - 1]
        self.gate = Gate.for_target(int(self.item["target_words"]), cfg.gate_low, cfg.gate_high)
        self.drafter = Drafter.for_config(llm, self.gate, ratio, cfg, "nst_prose", budget=self.budget,
                                          shrink=self._shrink)
        self.state = state
        self.new_state: NarrativeState | None = None
        self.emit = emit
        self.s = ChapterSession(index=index, gate=self.gate, with_state=cfg.state, lookback=cfg.lookback,
                                max_turns=cfg.max_turns, read_budget=cfg.read_budget,
                                search_budget=cfg.search_budget, correct_budget=cfg.correct_budget,
                                failed_budget=cfg.failed_call_budget, min_events=cfg.min_past_events,
                                open_requirements=tuple(state.future_requirements))
        self.abridged = False
        self.out_of_room = False
        """A call did not fit the context: the chapter ended early (the cap's degraded path)."""
        self.last_update = None
        """What the last applied update did (``agent.nst.state.Applied``)."""
        self.last_error: str | None = None
        """Why the last recorded call failed, if it did."""
        self.messages: list[Message] = self._opening()
        self.drafts = DraftKeeper()
        self._arguments: dict[str, Any] = {}
        """The ledger arguments of the call in flight (the write tool adds its draft's facts)."""
        self.stats: dict[str, Any] = {"turns": 0, "attempts": 0, "first_attempt_pass": None, "invalid_turns": 0,
                                      "failed_calls": 0, "tools": {}, "prompt_tokens": 0, "cached_prompt_tokens": 0,
                                      "completion_tokens": 0, "calls": 0}

    @property
    def ratio(self) -> float:
        return self.drafter.ratio

    # -- the prompt, fitted ------------------------------------------------------------------
    def _opening(self) -> list[Message]:
        cfg = self.config
        return [{"role": "system", "content": system_prompt(with_state=cfg.state)},
                {"role": "user", "content": chapter_prompt(
                    story_prompt=self.story_prompt, outline=self.outline, state=self.state if cfg.state else None,
                    completed=self.s.index - 1, chapter=self.item, gate=self.gate, lookback=self.s.lookback,
                    abridged=self.abridged)}]

    def text_tokens(self) -> int:
        return room.text_tokens(self.gate, self.ratio, exact=self.budget.counter.exact)

    def prose_tokens(self) -> int:
        return size_tokens(self.gate, self.ratio, cap=self.config.prose_max_tokens_cap, use_min=False,
                           trim=self.config.trim_cut_drafts)[0]

    def update_output(self) -> int:
        return room.update_output(self.budget.context, self.config.update_max_tokens)

    def work_room(self) -> int:
        """Tokens the chapter still needs beyond its conversation so far (``agent.nst.room``)."""
        s, cfg = self.s, self.config
        if not s.written:
            return room.unwritten_room(self.gate, self.ratio, context=self.budget.context,
                                       exact=self.budget.counter.exact, prose_cap=cfg.prose_max_tokens_cap,
                                       trim=cfg.trim_cut_drafts, update_max_tokens=cfg.update_max_tokens,
                                       with_state=s.with_state)
        if s.with_state and not s.updated:
            return self.update_output() + room.turn_slack(self.budget.context)
        return MIN_TURN_OUTPUT  # a turn that does not fit now ends the chapter (finish_without_turn)

    def fit_prompt(self) -> None:
        """Make the chapter prompt leave the chapter its working room (steps c, then d)."""
        budget, cfg = self.budget, self.config
        if budget.limit is None:
            return
        while True:
            prompt = budget.count(self.messages)
            over = prompt + self.work_room() > budget.limit
            state_tokens = budget.count([{"role": "user", "content": self.state.render()}]) if cfg.state else 0
            crowded = cfg.state and state_tokens > cfg.state_share * (budget.context or 0)
            if not over and not crowded:
                return
            if cfg.state:
                digested = consolidate_one(self.llm, budget, self.state, self.s.index, arc_chapters=cfg.arc_chapters,
                                           max_tokens=cfg.digest_max_tokens, temperature=cfg.temperature)
                if digested is not None:
                    self.state = digested
                    self.messages = self._opening()
                    continue
            if not over:
                return  # the state is large but the chapter fits: nothing more gives way
            if not self.abridged:
                self.abridged = True
                self.messages = self._opening()
                budget.note("abridge_outline", chapter=self.s.index, prompt_tokens=prompt)
                continue
            raise budget.fail(f"chapter {self.s.index}'s prompt and its working room", prompt, self.work_room())

    def _out_of_room(self) -> bool:
        """A call of this chapter cannot fit even after everything gave way: end the chapter the
        way the turn cap does (True), unless nothing was drafted yet (False: the run stops)."""
        s = self.s
        if s.written and s.required() == ["finish"]:  # written and updated: what is left is optional
            self.budget.note("finish_without_turn", chapter=s.index)
            self._record("finish", {"tool": "finish", "automatic": True, "budget": True}, "chapter finished", True)
            s.finished = True
            return True
        if s.written or self.drafts.best() is not None:
            self.budget.note("out_of_room", chapter=s.index, written=s.written, attempts=s.attempts)
            self.out_of_room = True
            return True
        return False

    def _shrink(self) -> str | None:
        """Free room in the conversation: the retained rejected draft first (step b), then read results."""
        kept = self.drafts.kept
        if kept is not None and self.messages[kept.message]["content"] != placeholder(kept):
            self.messages[kept.message] = {"role": "assistant", "content": placeholder(kept)}
            self.drafts.kept = None
            return "drop_retained_draft"
        for i, message in enumerate(self.messages):
            if i > 1 and message["role"] == "user" and LOOKUP_RESULT.match(message["content"]):
                self.messages[i] = {"role": "user", "content": READ_REMOVED}
                return "drop_lookup_result"
        return None

    def lookup_room(self) -> int | None:
        """Tokens a read or search result may take now (None: unbounded)."""
        budget = self.budget
        if budget.limit is None:
            return None
        return budget.limit - budget.count(self.messages) - self.work_room() - 64

    def read_window(self, text: str, offset: int, chapter: int) -> int:
        """Where a read of ``text`` from ``offset`` ends: the end, or the page that fits (step a)."""
        budget = self.budget
        room = self.lookup_room()
        if room is None:
            return len(text)
        # a page never takes more than a sixteenth of the context, so what a chapter spends on
        # lookback does not depend on how much room the story's length happens to leave
        room = min(room, (budget.context or 0) // READ_PAGE_SHARE)
        rest = text[offset:]
        whole = budget.count([{"role": "user", "content": rest}])
        if whole <= room:
            return len(text)
        if room < MIN_READ_PAGE:
            budget.note("refuse_read", chapter=chapter, room=room)
            raise ToolError("there is no room in the context for a read now; continue with the chapter")
        cut = int(len(rest) * room / whole * 0.95)
        space = rest.rfind("\n", 0, cut)
        space = space if space > cut // 2 else rest.rfind(" ", 0, cut)
        end = offset + (space if space > 0 else cut)
        budget.note("page_read", chapter=chapter, offset=offset, end=end, of=len(text), room=room)
        return end

    def fit_lookup(self, passages: list[str]) -> list[str]:
        """The best-ranked search passages that fit the room left (step a for search)."""
        room = self.lookup_room()
        if room is None:
            return passages
        kept: list[str] = []
        for passage in passages:
            if self.budget.count([{"role": "user", "content": "\n".join([*kept, passage])}]) > room:
                break
            kept.append(passage)
        if len(kept) < len(passages):
            self.budget.note("trim_search", chapter=self.s.index, kept=len(kept), of=len(passages), room=room)
        return kept

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> ChapterResult:
        s = self.s
        self.fit_prompt()
        while s.turn < s.max_turns and not s.finished:
            tools = legal_tools(s)
            if tools == ["finish"]:
                self._record("finish", {"tool": "finish", "automatic": True}, "chapter finished", True)
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
                    degraded, reason = True, ("state not updated: the context was full" if self.out_of_room
                                              else f"state not updated within {s.max_turns} turns")
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

    def _result(self, title: str, text: str, degraded: bool, reason: str | None) -> ChapterResult:
        self.stats.update(attempts=self.s.attempts, reads=self.s.reads, searches=self.s.searches,
                          corrects=self.s.corrects, failed_calls=self.s.failed, words=count_words(text),
                          target=self.gate.target, degraded=degraded)
        state = self.new_state if self.new_state is not None else (self.state if self.s.with_state else None)
        return ChapterResult(title.strip(), text, state, degraded, reason, self.ratio, self.stats)

    def _turn(self, tools: list[str]) -> None:
        s, cfg = self.s, self.config
        max_tokens = cfg.update_max_tokens if "update" in tools else cfg.tool_max_tokens
        floor = self.update_output() if "update" in tools else MIN_TURN_OUTPUT
        try:
            reply = self._generate(self.messages, turn_grammar(s, tools), max_tokens, "nst_turn", floor)
        except (TruncatedOutputError, OutputValidationError) as exc:
            self.stats["invalid_turns"] += 1
            s.failed += 1
            self._record("invalid", {"offered": tools}, None, False, str(exc))
            if isinstance(exc, TruncatedOutputError) and self.budget.clamped:
                self._free_room_after_cut(max_tokens)
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
        self._record(call.tool, arguments, result, ok, error)
        if not s.finished:
            self.messages.append({"role": "user", "content": f"{result}\n\n{self._next_hint()}"})

    def _free_room_after_cut(self, wanted: int) -> None:
        """A reply cut at a ``max_tokens`` the context imposed would be cut again if asked again:
        free room in the conversation, or, with nothing left to give, end the chapter as out of room
        (``run`` catches the error) instead of spending the turn cap on the same cut reply."""
        budget = self.budget
        done = self._shrink()
        prompt = budget.count(self.messages)
        if done is None:
            raise budget.fail(f"a turn of chapter {self.s.index} (its reply was cut at the context edge)", prompt,
                              wanted)
        budget.note(done, what=f"a turn of chapter {self.s.index}", prompt_tokens=prompt)

    # -- what the write and update tools do -------------------------------------------------
    def write_draft(self, title: str) -> str:
        """One draft of the chapter under the gate (the ``write`` tool)."""
        s = self.s
        self.messages.append({"role": "user", "content": prose_request(s.index, title, self.gate)})
        attempt = self.drafter.attempt(self.messages)
        self._count(attempt.reply)
        self.messages.append({"role": "assistant", "content": attempt.text})
        s.attempts += 1
        if self.stats["first_attempt_pass"] is None:
            self.stats["first_attempt_pass"] = attempt.accepted
        self._arguments.update(attempt.facts())
        self._emit("draft", words=attempt.words, accepted=attempt.accepted)
        if attempt.accepted:
            s.accepted_title, s.accepted_text = title, attempt.text
            return f"ACCEPTED: {attempt.words} words ({self.gate.describe()})."
        draft = Draft(title, attempt.text, attempt.words, attempt.truncated, self.gate.distance(attempt.words),
                      len(self.messages) - 1)
        self._arguments["kept_in_context"] = self.drafts.reject(draft, self.messages)
        return attempt.feedback(self.gate)

    def apply_update(self, call: UpdateCall) -> str:
        """Apply the chapter's state transition per entry (the ``update`` tool): entries whose
        evidence is not in the accepted chapter are refused and named, the rest applies; after
        a refusal one more update may fix the refused entries."""
        s = self.s
        base = self.new_state if self.new_state is not None else self.state
        text = s.accepted_text if self.config.evidence else None
        retry = s.retry_update
        try:
            applied = base.apply(call, chapter=s.index, text=text)
        except UpdateError as exc:
            if retry:  # the one retry of refused entries is spent; the entries applied before stay
                s.retry_update = False
                raise ToolError(f"update rejected, nothing more was applied: {exc}. The state keeps what the "
                                "first update applied; finish the chapter.") from exc
            raise ToolError(f"update rejected, nothing was applied: {exc}. Call update again with the "
                            "problems fixed.") from exc
        self.new_state = applied.state
        self.last_update = applied
        s.updated = True
        s.retry_update = bool(applied.refused) and not retry
        s.open_requirements = tuple(applied.state.future_requirements)
        self._arguments["refused"] = applied.refused
        counts = applied.state.counts()
        message = (f"State updated: {describe_update(call)}; {applied.applied} entries applied. The state now "
                   f"holds {counts['characters']} characters, {counts['past_events']} past events, "
                   f"{counts['open_requirements']} open requirements.")
        if applied.notes:
            message += " Note: " + "; ".join(applied.notes) + "."
        if applied.refused:
            message += (f" REFUSED {len(applied.refused)} entr{'y' if len(applied.refused) == 1 else 'ies'}: "
                        + "; ".join(applied.refused) + "."
                        + (" You may call update once more with only the refused entries, fixed." if s.retry_update
                           else ""))
        return message

    def update_from_text(self, title: str, text: str) -> bool:
        """One update call for chapter text that already exists (``fabula edit``: the writer's
        edited text): the chapter's prompt from the state before it (fitted as for writing it), the
        text as the accepted draft, then the update through the path every chapter's update takes
        (the same grammar, evidence checked against ``text``, recorded in the ledger). True when
        the update applied; the new state is then :attr:`new_state`."""
        s = self.s
        s.turn = 1
        s.accepted_title, s.accepted_text = title, text
        self.fit_prompt()
        self.messages += [{"role": "assistant", "content": json.dumps({"tool": "write", "title": title})},
                          {"role": "user", "content": prose_request(s.index, title, self.gate)},
                          {"role": "assistant", "content": text},
                          {"role": "user", "content": "The writer has edited this chapter by hand: the text above is "
                           "the chapter as it now stands and is kept. Call update now with what it changed."}]
        return self._fallback_call(TOOLS["update"].grammar(s), self.config.update_max_tokens)

    def _fallback_update(self) -> None:
        """Update calls past the cap, so the chapter kept still reaches the state: the full update
        first; if that is cut off or invalid, the one most important event alone (a bounded reply)."""
        self.messages.append({"role": "user", "content": "The turn limit is reached. The chapter above is kept. "
                              "Call update now with what it changed."})
        if self._fallback_call(TOOLS["update"].grammar(self.s), self.config.update_max_tokens):
            return
        self.messages.append({"role": "user", "content": "That update could not be applied. Record only the one "
                              "most important event of this chapter, as a single past event."})
        # one event is a short reply: it may still fit where the full update did not
        self._fallback_call(EventUpdate, self.config.update_max_tokens, MIN_TURN_OUTPUT)

    def _fallback_call(self, grammar: Any, max_tokens: int, min_output: int | None = None) -> bool:
        """One fallback update; True when it was applied."""
        self._arguments = {}
        try:
            reply = self._generate(self.messages, grammar, max_tokens, "nst_turn",
                                   min(max_tokens, min_output or self.update_output()))
        except ContextExceededError as exc:
            self.budget.note("skip_fallback_update", chapter=self.s.index, error=str(exc)[:200])
            self.last_error = str(exc)
            return False
        except (TruncatedOutputError, OutputValidationError) as exc:
            self._record("invalid", {"offered": ["update"], "fallback": True}, None, False, str(exc))
            return False
        self.messages.append({"role": "assistant", "content": reply.text})
        call = reply.parsed if isinstance(reply.parsed, UpdateCall) else reply.parsed.as_update()
        try:
            result, ok, error = self.apply_update(call), True, None
        except ToolError as exc:
            result, ok, error = f"ERROR: {exc}", False, str(exc)
        self._record("update", {**call.model_dump(), **self._arguments, "fallback": True}, result, ok, error)
        if not ok:
            self.messages.append({"role": "user", "content": result})
        return ok

    # -- plumbing --------------------------------------------------------------------------
    def _next_hint(self) -> str:
        tools = legal_tools(self.s)
        left = self.s.turns_left()
        return f"Available now: {', '.join(tools)}. Turns left in this chapter: {left}."

    def _generate(self, messages: list[Message], output_type: Any, max_tokens: int, role: str,
                  min_output: int) -> Completion:
        reply = self.budget.generate(self.llm, messages, output_type, temperature=self.config.temperature,
                                     max_tokens=max_tokens, min_output=min_output, role=role,
                                     what=f"a turn of chapter {self.s.index}", shrink=self._shrink)
        self._count(reply)
        return reply

    def _count(self, reply: Completion) -> None:
        usage = reply.usage
        self.stats["calls"] += 1
        self.stats["prompt_tokens"] += usage.prompt_tokens
        self.stats["cached_prompt_tokens"] += usage.cached_prompt_tokens
        self.stats["completion_tokens"] += usage.completion_tokens

    def _record(self, tool: str, arguments: dict[str, Any], result: str | None, ok: bool,
                error: str | None = None) -> None:
        self.last_error = None if ok else (error or "failed")
        if result is not None and len(result) > LEDGER_RESULT_CHARS:
            result = result[:LEDGER_RESULT_CHARS] + f"... [{len(result)} characters]"
        self.store.record_tool_call(turn=self.s.turn, tool=tool, arguments=arguments, result=result, ok=ok,
                                    error=error)
        self._emit("tool", tool=tool, ok=ok)

    def _emit(self, kind: str, **data: Any) -> None:
        if self.emit is not None:
            self.emit(kind, data.get("tool"), turn=self.s.turn, attempts=self.s.attempts, **data)
