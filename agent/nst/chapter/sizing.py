"""Sizing a chapter: its prose replies from the length gate, its room in the context, its share of it.

* **Prose sizing**: ``max_tokens``/``min_tokens`` for a draft aimed at the gate (``agent.gate``), from a
  tokens-per-word ratio measured on the model's own drafts (shared by NstAgent, RollSum and Direct).
* **Room**: how much of the context an unwritten chapter needs (a draft, or the accepted text plus its
  update, plus a slack for the turns' short messages): one rule for the chapter loop (its prompt must
  leave this room before the first turn) and for the planner (how many chapters a story needs).
* **The run's budget** (:func:`run_budget`, the shared ``agent.llm.budget.Budget`` from the run's settings)
  and :class:`ChapterBudget`, which applies it to the chapter in flight: before the first turn older arcs
  of past events are digested (step c), then the outline is abridged (step d); during the chapter a read
  returns the page that fits (step a), a search the passages that fit, and a call that would not fit
  drops the retained rejected draft (step b), then earlier read results. Each step is noted in the ledger.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from agent.gate import Gate
from agent.limits import (
    CJK_TOKENS_PER_WORD,
    LATIN_TOKENS_PER_WORD,
    REFERENCE_TOKENS_PER_CJK,
    REFERENCE_TOKENS_PER_WORD,
)
from agent.llm.budget import Budget
from agent.llm.budget import run_budget as _run_budget
from agent.llm.types import Completion, Message
from agent.nst.chapter.rejected import DraftKeeper, placeholder
from agent.nst.chapter.tools import ChapterSession, ToolError
from agent.nst.config import NstConfig
from agent.nst.state import NarrativeState
from agent.text import CJK_CHAR, count_words

RATIO_BOUNDS = (0.5, 4.0)
"""A measured ratio outside this is a broken reply, not a property of the model."""


def mostly_cjk(sample: str) -> bool:
    """Most of ``sample``'s words are CJK characters (a Chinese or Japanese story)."""
    return len(CJK_CHAR.findall(sample)) * 2 > count_words(sample)


def initial_ratio(sample: str, configured: float | None) -> float:
    """Tokens per word before anything is measured: configured, else by script of the prompt."""
    if configured:
        return float(configured)
    return CJK_TOKENS_PER_WORD if mostly_cjk(sample) else LATIN_TOKENS_PER_WORD


REFERENCE_MIN_BUDGET = 1024
REFERENCE_GROWTH, REFERENCE_MIN_STEP = 1.5, 1024


def reference_budget(target_words: int, overhead: int, ceiling: int, *, cjk: bool) -> int:
    """The reference's dynamic budget of one chapter call (``turn_token_overhead``):
    min(ceiling, max(1024, ⌈ratio × target + overhead⌉)), ratio 1.35 per word or 0.85 per CJK character."""
    ratio = REFERENCE_TOKENS_PER_CJK if cjk else REFERENCE_TOKENS_PER_WORD
    return min(ceiling, max(REFERENCE_MIN_BUDGET, math.ceil(target_words * ratio + overhead)))


def grown_budget(current: int, ceiling: int) -> int:
    """The reference RollSum's next budget after a draft cut at ``current``: ×1.5, at least +1,024, at most
    ``ceiling``."""
    return min(ceiling, max(math.ceil(current * REFERENCE_GROWTH), current + REFERENCE_MIN_STEP))


def update_ratio(ratio: float, reply: Completion, *, weight: float = 0.5) -> float:
    """Blend one prose reply's tokens per word into the running ratio (ignores broken or tiny
    replies). Measured on the raw reply, which is what the tokens paid for, and on cut-off
    replies too: a draft cut short of the range means the ratio was too low, and the next
    draft must get more room."""
    words = count_words(reply.text)
    completion_tokens = reply.usage.completion_tokens
    if words < 20 or completion_tokens <= 0:
        return ratio
    measured = completion_tokens / words
    if not RATIO_BOUNDS[0] <= measured <= RATIO_BOUNDS[1]:
        return ratio
    return (1 - weight) * ratio + weight * measured


HEADROOM = 1.25
TRIM_HEADROOM = 1.05


def size_tokens(gate: Gate, ratio: float, *, cap: int, use_min: bool, trim: bool = False) -> tuple[int, int | None]:
    """``(max_tokens, min_tokens)`` for a prose reply aimed at ``gate``.

    The ceiling leaves 25% over the top of the range (a longer reply is rejected anyway, and a
    cut one always is); the floor asks for 90% of the bottom, so an under-estimated ratio
    cannot push a draft past the top. With trimming (``trim_cut_drafts``) the ceiling sits just
    over the top instead: a draft that would run long is cut there and trimmed back to its last
    sentence inside the range, rather than finishing too long and being rejected (the tiny
    model's chapter drafts ended at 999 and 735 words for ranges of 440-660 and 320-480).
    """
    headroom = TRIM_HEADROOM if trim else HEADROOM
    max_tokens = min(cap, math.ceil(gate.high * ratio * headroom) + 64)
    if not use_min:
        return max_tokens, None
    return max_tokens, max(0, min(max_tokens - 1, math.floor(gate.low * ratio * 0.9)))


TURN_SLACK = 400
"""Room kept for the short messages the writes add (calls, prose requests, verdicts, a rejected draft's
placeholder); a sixteenth of a smaller context."""
MIN_UPDATE_OUTPUT = 1024
ESTIMATE_MARGIN = 1.4
"""The characters estimate counts English prose at about 1.85 tokens a word against a model's ~1.3."""


def update_output(context: int | None, update_max_tokens: int) -> int:
    """The least room an update reply gets: a sixth of the context, 256 to 1024 tokens."""
    floor = MIN_UPDATE_OUTPUT if context is None else max(256, min(MIN_UPDATE_OUTPUT, context // 6))
    return min(update_max_tokens, floor)


def turn_slack(context: int | None) -> int:
    return TURN_SLACK if context is None else min(TURN_SLACK, max(96, context // 16))


def text_tokens(gate: Gate, ratio: float, *, exact: bool) -> int:
    """Tokens of an accepted chapter in the conversation (the top of the gate, at the ratio); an
    estimating counter counts prose higher than the model's tokenizer, so it gets margin."""
    return math.ceil(gate.high * max(ratio, 1.0) * (1.0 if exact else ESTIMATE_MARGIN)) + 16


def unwritten_room(
    gate: Gate,
    ratio: float,
    *,
    context: int | None,
    exact: bool,
    prose_cap: int,
    trim: bool,
    update_max_tokens: int,
    with_state: bool,
) -> int:
    """Tokens an unwritten chapter needs beyond its prompt."""
    prose = size_tokens(gate, ratio, cap=prose_cap, use_min=False, trim=trim)[0]
    update = update_output(context, update_max_tokens) if with_state else 0
    return max(prose, text_tokens(gate, ratio, exact=exact) + update) + turn_slack(context)


def run_budget(ctx: Any) -> Budget:
    """The budget of a NstAgent-family run (``ctx``: a ``RunContext`` whose config is a
    ``StoryTarget``): context from the setting, server or model; facts in the plan table;
    actions in the ledger."""
    return _run_budget(ctx, ctx.config.context_tokens, ctx.config.context_reserve)


MIN_TURN_OUTPUT = 128
MIN_READ_PAGE = 200
READ_PAGE_SHARE = 16
READ_REMOVED = "[lookup result removed to make room in the context; look it up again if needed]"
LOOKUP_RESULT = re.compile(r"^(Chapter \d+: |\d+ passage\(s\) for )")


class ChapterBudget:
    """What one chapter may spend: sized from the gate, the measured ratio and the run's budget."""

    def __init__(
        self, budget: Budget, gate: Gate, config: NstConfig, session: ChapterSession, ratio: Callable[[], float]
    ) -> None:
        self.budget, self.gate, self.config, self.s = budget, gate, config, session
        self._ratio = ratio

    def text_tokens(self) -> int:
        return text_tokens(self.gate, self._ratio(), exact=self.budget.counter.exact)

    def update_output(self) -> int:
        return update_output(self.budget.context, self.config.update_max_tokens)

    def work_room(self) -> int:
        """Tokens the chapter still needs beyond its conversation so far (``agent.nst.chapter.sizing``: the
        planner sizes chapters with the same rule)."""
        s, cfg = self.s, self.config
        if not s.written:
            return unwritten_room(
                self.gate,
                self._ratio(),
                context=self.budget.context,
                exact=self.budget.counter.exact,
                prose_cap=cfg.prose_max_tokens_cap,
                trim=cfg.trim_cut_drafts,
                update_max_tokens=cfg.update_max_tokens,
                with_state=s.with_state,
            )
        if s.with_state and not s.updated:
            return self.update_output() + turn_slack(self.budget.context)
        return MIN_TURN_OUTPUT  # a turn that does not fit now ends the chapter (finish_without_turn)

    def fit_prompt(
        self,
        messages: Callable[[], list[Message]],
        state: Callable[[], NarrativeState],
        digest: Callable[[], bool],
        abridge: Callable[[], bool],
        *,
        drop_style: Callable[[], str | None] | None = None,
    ) -> None:
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
            state_tokens = (
                budget.count([{"role": "user", "content": state().render(cfg.state_style)}]) if cfg.state else 0
            )
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
            raise budget.fail(
                f"a turn of chapter {self.s.index} (its reply was cut at the context edge)", prompt, wanted
            )
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
