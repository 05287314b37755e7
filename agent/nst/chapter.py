"""The chapter in flight: its conversation (the chapter prompt, fitted to the context), its state,
its drafts, and what a tool may ask of it.

:class:`ChapterInFlight` holds what one chapter has and can do: the opening messages (fitted by
``agent.nst.chapter_budget.ChapterBudget``: older arcs digested, the outline abridged), reads,
searches and corrections through the store, a draft under the gate, an update of the state. It
implements ``agent.nst.tools.Chapter``, the tools' narrow interface; ``agent.nst.loop.ChapterLoop``
drives it turn by turn.
"""

from __future__ import annotations

from typing import Any

from agent.language import language_line
from agent.llm import LLM
from agent.llm.types import Completion, Message
from agent.nst.avoid import avoid_list
from agent.nst.budget import Budget
from agent.nst.chapter_budget import ChapterBudget
from agent.nst.chapter_ledger import ChapterLedger, Emit
from agent.nst.config import NstConfig
from agent.nst.consolidate import consolidate_one
from agent.nst.drafting import Drafter
from agent.nst.drafts import Draft, DraftKeeper
from agent.nst.prompts import chapter_prompt, prose_request, system_prompt
from agent.nst.state import Applied, NarrativeState
from agent.nst.tools import ChapterSession, ToolError
from agent.nst.updating import update_state
from agent.store import RunStore
from agent.store.locks import locked
from agent.store.records import Chapter
from agent.store.search import Hit
from agent.store.series import series, series_search
from agent.style.guide import prompt_block
from grammars.nst import UpdateCall


class ChapterInFlight:
    """The chapter in flight: its conversation, fitted to the context, its state and drafts, and
    what a tool may ask of it (implements ``agent.nst.tools.Chapter``); the loop that drives it
    is ``agent.nst.loop.ChapterLoop``."""

    def __init__(self, llm: LLM, store: RunStore, *, plan: dict[str, Any], story_prompt: str,
                 state: NarrativeState, index: int, config: NstConfig, ratio: float,
                 emit: Emit | None = None, budget: Budget | None = None) -> None:
        cfg = config
        self.llm, self.store, self.config = llm, store, cfg
        self.budget = budget or Budget(None)
        self.outline = plan["outline"]
        self.story_prompt = story_prompt
        self.item = self.outline[index - 1]
        self.gate = cfg.gate(int(self.item["target_words"]))
        self.drafter = Drafter.for_config(llm, self.gate, ratio, cfg, "nst_prose", budget=self.budget,
                                          shrink=self._shrink)
        self.state = state
        self.new_state: NarrativeState | None = None
        self.s = ChapterSession.for_config(index, self.gate, cfg, tuple(state.future_requirements))
        self.s.earlier_books = series(store) is not None
        self.room = ChapterBudget(self.budget, self.gate, cfg, self.s, lambda: self.drafter.ratio)
        self.abridged = False
        self.avoid = avoid_list(store, cfg, index)
        """The book's worst offenders so far, named in the task (``--lint-avoid``; empty when off)."""
        self.style_guide: dict[str, Any] | None = store.get_plan("style")
        self.style_parts = {"card": True, "exemplars": True}
        """What of the style guide the prompt still carries (exemplars give way first, then the card)."""
        self.out_of_room = False
        """A call did not fit the context: the chapter ended early (the cap's degraded path)."""
        self.last_update: Applied | None = None
        """What the last applied update did (``agent.nst.state.Applied``)."""
        self.ledger = ChapterLedger(store, self.s, emit)
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
        return [{"role": "system", "content": system_prompt(with_state=cfg.state, evidence=cfg.evidence)},
                {"role": "user", "content": chapter_prompt(
                    story_prompt=self.story_prompt, outline=self.outline, state=self.state if cfg.state else None,
                    completed=self.s.index - 1, chapter=self.item, gate=self.gate, lookback=self.s.lookback,
                    abridged=self.abridged, avoid=self.avoid, style=self._style_block(),
                    language=language_line(self.story_prompt, cfg))}]

    def _style_block(self) -> str:
        if not self.style_guide:
            return ""
        return prompt_block(self.style_guide, self.item, **self.style_parts)

    def fit_prompt(self) -> None:
        """Make the chapter prompt leave the chapter its working room (steps c, then d)."""
        self.room.fit_prompt(lambda: self.messages, lambda: self.state, self._digest, self._abridge,
                             drop_style=self._drop_style)

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
        digested = consolidate_one(self.llm, self.budget, self.state, self.s.index,
                                   arc_chapters=self.config.arc_chapters, max_tokens=self.config.digest_max_tokens,
                                   temperature=self.config.temperature)
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

    # -- what a tool may ask (agent.nst.tools.Chapter) -------------------------------------
    @property
    def session(self) -> ChapterSession:
        return self.s

    def committed(self, chapter: int) -> Chapter | None:
        return self.store.chapter(chapter)

    def read_window(self, text: str, offset: int, chapter: int) -> int:
        return self.room.read_window(self.messages, text, offset, chapter)

    def search(self, query: str) -> tuple[list[Hit], list[tuple[str, str]]]:
        hits = series_search(self.store, query, k=int(self.config.search_hits), before=self.s.index)
        events = self.state.find_events(query) if self.s.with_state and self.state.digests else []
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
        s = self.s
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
            return f"ACCEPTED: {attempt.words} words ({self.gate.describe()})."
        draft = Draft(title, attempt.text, attempt.words, attempt.truncated, self.gate.distance(attempt.words),
                      len(self.messages) - 1)
        self._arguments["kept_in_context"] = self.drafts.reject(draft, self.messages)
        return attempt.feedback(self.gate)

    def apply_update(self, call: UpdateCall) -> str:
        """Apply the chapter's state transition per entry (the ``update`` tool, ``agent.nst.updating``)."""
        base = self.new_state if self.new_state is not None else self.state
        applied, message = update_state(self.s, base, call, evidence=self.config.evidence,
                                       atomic=self.config.atomic_update)
        self.new_state = applied.state
        self.last_update = applied
        self._arguments["refused"] = applied.refused
        return message

    def _generate(self, messages: list[Message], output_type: Any, max_tokens: int, role: str,
                  min_output: int) -> Completion:
        reply = self.budget.generate(self.llm, messages, output_type, temperature=self.config.temperature,
                                     max_tokens=max_tokens, min_output=min_output, role=role,
                                     what=f"a turn of chapter {self.s.index}", shrink=self._shrink)
        self.ledger.count(reply)
        return reply
