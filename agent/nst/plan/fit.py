"""More, shorter chapters when the model's context cannot hold the planned ones.

The planner's chapter count follows the story's length (``planner.chapter_count``, or the
reference's, ``reference.chapter_count``, under ``outline_style`` "reference"); a chapter
then needs its prompt (system, story prompt, outline) plus its working room (``agent.nst.chapter.sizing``:
the draft, or the accepted text and its update). When the model's context is too small for
that, the run would stop in chapter 1; instead the planner plans the least number of chapters
whose chapters fit, says so in one line and records it (plan key ``chapters_fitted``). Later
chapters keep fitting as today: their prompts give way in the recorded order (digest, abridged
outline) as the state grows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.gate import Gate
from agent.llm.budget import Budget
from agent.nst.chapter.planned import PlannedChapter
from agent.nst.chapter.prompt import chapter_prompt, system_prompt
from agent.nst.chapter.sizing import initial_ratio, unwritten_room
from agent.nst.plan.planner import chapter_count
from agent.nst.plan.reference import chapter_count as reference_count

MIN_CHAPTER_WORDS = 150
"""No chapter is planned shorter than this: below it the story cannot be told in chapters, and
the run stops with the context error as before (raise the context)."""
OUTLINE_ITEM = (
    "A chapter in which the protagonist follows the trail one step further, meets resistance from "
    "someone who knows more than they say, and leaves with a new question that the next chapter opens."
)
"""A stand-in for one outline entry's description (the planner writes 2-4 sentences)."""
DEFAULT_UPDATE_TOKENS = 4096
STATE_SHARE = 8
"""What chapter 1's prompt lacks and later ones hold (the narrative state, outline entries longer
than the stand-in) is allowed an eighth of the context a chapter, two eighths where that fits."""


@dataclass(frozen=True)
class FittedChapters:
    planned: int
    chapters: int
    context: int
    needed: int
    """Prompt plus working room of a chapter at the planned count, in tokens."""

    def describe(self) -> str:
        return (
            f"planning {self.chapters} chapters instead of {self.planned}: a chapter of the planned length needs "
            f"about {self.needed} tokens, more than the context of {self.context} holds"
        )

    def record(self) -> dict[str, Any]:
        return {"planned": self.planned, "chapters": self.chapters, "context": self.context, "needed": self.needed}


def fit_chapters(config: Any, budget: Budget | None) -> FittedChapters | None:
    """When a chapter of the planned count cannot fit ``budget``'s context once the state holds a
    chapter's worth: the least count whose chapters fit with room for the state to grow, else the
    count that needs least. ``None`` when the planned count fits (or the context is unknown, or
    no count fits: the chapter loop then says the context is too small, as before)."""
    if budget is None or budget.limit is None:
        return None
    planned = (
        reference_count(config.words)
        if getattr(config, "outline_style", "fabula") == "reference"
        else chapter_count(config.words)
    )
    needed = chapter_needs(config, budget, planned)
    growth = int(budget.context or 0) // STATE_SHARE
    if needed + growth <= budget.limit:
        return None  # the planned chapters fit, with room for a chapter's worth of state: the paper's plan
    counts = range(planned + 1, max(planned, config.words // MIN_CHAPTER_WORDS) + 1)
    needs = {chapters: chapter_needs(config, budget, chapters) for chapters in counts}
    for room in (budget.limit - 2 * growth, budget.limit - growth):
        fitting = [chapters for chapters, need in needs.items() if need <= room]
        if fitting:
            return FittedChapters(planned, fitting[0], int(budget.context or 0), needed)
    tightest = min(needs, key=needs.__getitem__, default=None)  # no room for the state to grow: the least need
    if tightest is not None and needs[tightest] < needed and needs[tightest] <= budget.limit:
        return FittedChapters(planned, tightest, int(budget.context or 0), needed)
    return None


def chapter_needs(config: Any, budget: Budget, chapters: int) -> int:
    """Tokens chapter 1 of ``chapters`` needs: its opening prompt (empty state) and its working room."""
    target = max(1, round(config.words / chapters))
    gate = Gate.for_target(target, config.gate_low, config.gate_high)
    outline = [PlannedChapter(i, f"Chapter {i}", OUTLINE_ITEM, target) for i in range(1, chapters + 1)]
    with_state = bool(getattr(config, "state", True))
    messages = [
        {
            "role": "system",
            "content": system_prompt(
                with_state=with_state,
                evidence=bool(getattr(config, "evidence", True)),
                notes=getattr(config, "state_style", "fabula") == "reference",
            ),
        },
        {
            "role": "user",
            "content": chapter_prompt(
                story_prompt=config.prompt,
                outline=outline,
                state=None,
                completed=0,
                chapter=outline[0],
                gate=gate,
                lookback=bool(getattr(config, "lookback", True)),
            ),
        },
    ]
    work = unwritten_room(
        gate,
        initial_ratio(config.prompt, config.tokens_per_word),
        context=budget.context,
        exact=budget.counter.exact,
        prose_cap=config.prose_max_tokens_cap,
        trim=config.trim_cut_drafts,
        update_max_tokens=getattr(config, "update_max_tokens", DEFAULT_UPDATE_TOKENS),
        with_state=True,
    )
    return budget.count(messages) + work
