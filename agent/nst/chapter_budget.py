"""One chapter's share of the context: what it needs, what gives way, and the room for lookups.

The run's :class:`agent.nst.budget.Budget` knows the context and counts tokens; a
:class:`ChapterBudget` applies it to the chapter in flight. Before the first turn the chapter
prompt must leave the chapter room to work (a draft, the accepted text and its update); if it
does not, older arcs of past events are digested (step c) and then the outline is abridged to
the acts around this chapter (step d). During the chapter a read returns the page that fits
(step a), a search the passages that fit, and a call that would not fit drops the retained
rejected draft (step b), then earlier read results. Each step is noted in the ledger.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from agent.gate import Gate
from agent.llm.types import Message
from agent.nst import room
from agent.nst.budget import Budget
from agent.nst.config import NstConfig
from agent.nst.drafts import DraftKeeper, placeholder
from agent.nst.length import size_tokens
from agent.nst.state import NarrativeState
from agent.nst.tools import ChapterSession, ToolError

MIN_TURN_OUTPUT = 128
MIN_READ_PAGE = 200
READ_PAGE_SHARE = 16
READ_REMOVED = "[lookup result removed to make room in the context; look it up again if needed]"
LOOKUP_RESULT = re.compile(r"^(Chapter \d+: |\d+ passage\(s\) for )")


class ChapterBudget:
    """What one chapter may spend: sized from the gate, the measured ratio and the run's budget."""

    def __init__(self, budget: Budget, gate: Gate, config: NstConfig, session: ChapterSession,
                 ratio: Callable[[], float]) -> None:
        self.budget, self.gate, self.config, self.s = budget, gate, config, session
        self._ratio = ratio

    def text_tokens(self) -> int:
        return room.text_tokens(self.gate, self._ratio(), exact=self.budget.counter.exact)

    def prose_tokens(self) -> int:
        return size_tokens(self.gate, self._ratio(), cap=self.config.prose_max_tokens_cap, use_min=False,
                           trim=self.config.trim_cut_drafts)[0]

    def update_output(self) -> int:
        return room.update_output(self.budget.context, self.config.update_max_tokens)

    def work_room(self) -> int:
        """Tokens the chapter still needs beyond its conversation so far (``agent.nst.room``: the
        planner sizes chapters with the same rule)."""
        s, cfg = self.s, self.config
        if not s.written:
            return room.unwritten_room(self.gate, self._ratio(), context=self.budget.context,
                                       exact=self.budget.counter.exact, prose_cap=cfg.prose_max_tokens_cap,
                                       trim=cfg.trim_cut_drafts, update_max_tokens=cfg.update_max_tokens,
                                       with_state=s.with_state)
        if s.with_state and not s.updated:
            return self.update_output() + room.turn_slack(self.budget.context)
        return MIN_TURN_OUTPUT  # a turn that does not fit now ends the chapter (finish_without_turn)

    def fit_prompt(self, messages: Callable[[], list[Message]], state: Callable[[], NarrativeState],
                   digest: Callable[[], bool], abridge: Callable[[], bool], *,
                   drop_style: Callable[[], str | None] | None = None) -> None:
        """Make the chapter prompt (``messages()``) leave the chapter its working room: ``digest``
        the oldest arc of past events while the prompt is over or the state crowds the context
        (step c; False when nothing is left to digest), then ``abridge`` the outline once (step d;
        False when it already is); past that the chapter cannot be written in this context. The writer's
        style guide (``drop_style``: its exemplars, then its card) gives way between the two, last but one."""
        budget, cfg = self.budget, self.config
        if budget.limit is None:
            return
        while True:
            prompt = budget.count(messages())
            over = prompt + self.work_room() > budget.limit
            state_tokens = budget.count([{"role": "user", "content": state().render()}]) if cfg.state else 0
            crowded = cfg.state and state_tokens > cfg.state_share * (budget.context or 0)
            if not over and not crowded:
                return
            if cfg.state and digest():
                continue
            if not over:
                return  # the state is large but the chapter fits: nothing more gives way
            dropped = drop_style() if drop_style is not None else None
            if dropped:
                budget.note(dropped, chapter=self.s.index, prompt_tokens=prompt)
                continue
            if abridge():
                budget.note("abridge_outline", chapter=self.s.index, prompt_tokens=prompt)
                continue
            raise budget.fail(f"chapter {self.s.index}'s prompt and its working room", prompt, self.work_room())

    @staticmethod
    def shrink(messages: list[Message], drafts: DraftKeeper) -> str | None:
        """Free room in the conversation: the retained rejected draft first (step b), then read results."""
        kept = drafts.kept
        if kept is not None and messages[kept.message]["content"] != placeholder(kept):
            messages[kept.message] = {"role": "assistant", "content": placeholder(kept)}
            drafts.kept = None
            return "drop_retained_draft"
        for i, message in enumerate(messages):
            if i > 1 and message["role"] == "user" and LOOKUP_RESULT.match(message["content"]):
                messages[i] = {"role": "user", "content": READ_REMOVED}
                return "drop_lookup_result"
        return None

    def free_room_after_cut(self, messages: list[Message], drafts: DraftKeeper, wanted: int) -> None:
        """A reply cut at a ``max_tokens`` the context imposed would be cut again if asked again:
        free room in the conversation, or, with nothing left to give, end the chapter as out of room
        (the loop catches the error) instead of spending the turn cap on the same cut reply."""
        budget = self.budget
        done = self.shrink(messages, drafts)
        prompt = budget.count(messages)
        if done is None:
            raise budget.fail(f"a turn of chapter {self.s.index} (its reply was cut at the context edge)", prompt,
                              wanted)
        budget.note(done, what=f"a turn of chapter {self.s.index}", prompt_tokens=prompt)

    def lookup_room(self, messages: list[Message]) -> int | None:
        """Tokens a read or search result may take now (None: unbounded)."""
        budget = self.budget
        if budget.limit is None:
            return None
        return budget.limit - budget.count(messages) - self.work_room() - 64

    def read_window(self, messages: list[Message], text: str, offset: int, chapter: int) -> int:
        """Where a read of ``text`` from ``offset`` ends: the end, or the page that fits (step a)."""
        budget = self.budget
        room = self.lookup_room(messages)
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

    def fit_lookup(self, messages: list[Message], passages: list[str]) -> list[str]:
        """The best-ranked search passages that fit the room left (step a for search)."""
        room = self.lookup_room(messages)
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
