"""Every setting of the NstAgent pipeline and its baselines, typed, with the paper's defaults.

The whole configuration is stored (and fingerprinted) with the run, so a resume with different
settings is refused unless forced, and every figure can be traced to the settings behind it.
Ranges are checked once, when a run is configured (``agent.settings.Settings.parse``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from pydantic import Field, model_validator

from agent.gate import DEFAULT_HIGH, DEFAULT_LOW, Gate
from agent.limits import MAX_WORDS, TOKEN_CAP
from agent.settings import SMALL_PROSE_LONG_PROMPTS, SMALL_STRUCTURED_LONG_PROMPTS, WritingControls

PLANNER_VERSION = "2"
"""2: the outline stage also asks for the book's title (a version-1 cached plan has none)."""


PAPER_STORY: dict[str, Any] = {"min_tokens": False, "repetition_guard": False, "trim_cut_drafts": False}
"""The ``paper`` profile of every chapter-based method: no prose floor (NstAgent App. A.1, line 401 of
the seed: every method rejects a reply at its token limit, none asks for a minimum), no repetition guard."""
PAPER_PLANNER: dict[str, Any] = {
    "planner_max_tokens": 16384,
    "premise_from": 10_000,
    "synopsis_from": 20_000,
    "acts_from": 100_000,
    "synopsis_words": True,
    "free_outline": True,
}
"""The reference planner (zhennan1/NstAgent code/agent/agent_core.py): ``DEFAULT_MAX_TOKENS = 16384``
(line 49) for every stage; ``stage_count_for_words``: the chapter outline alone below 10K, the premise
from 10K, the synopsis (~1,000 words, ~2,500 with acts) from 20K, the acts from 100K; the chapter
outline's count "approximately" the anchors and each chapter's words "up to you" (``outline_chapters_prompt``)."""
PAPER_NST: dict[str, Any] = {
    **PAPER_STORY,
    **PAPER_PLANNER,
    "prose_max_tokens": 16384,
    "tool_max_tokens": 16384,
    "update_max_tokens": 16384,
    "evidence": False,
    "atomic_update": True,
    "fallback_update": False,
    "required_after_failures": False,
    "state_share": 1.0,
    "min_past_events": 0,
    "failed_update_limit": 0,
    "search_style": "reference",
}
"""NstAgent as the paper: the reference's 16,384 tokens for every call of the chapter loop (agent_core.py
line 49, with line 101 ``DEFAULT_CHAPTER_TOKEN_CONTROL = "fixed"``), Eq. 6's atomic update
with no evidence and no second call (Section 4.3), no update past the 50-turn cap, every tool on offer
whatever failed, the state whole unless the chapter's request would not fit, and the reference's search
(``ChapterSearchIndex``: its tokens, ranking, tie order and JSON hits)."""
PAPER_ROLLSUM: dict[str, Any] = {
    **PAPER_STORY,
    **PAPER_PLANNER,
    "prose_max_tokens": 32768,
    "summary_max_tokens": 16384,
    "reference_prompts": True,
}
"""RollSum (App. A.1): "a 32,768-token limit per chapter call", "each summary call has a 16,384-token
output limit"."""
PAPER_DIRECT: dict[str, Any] = {**PAPER_STORY, "prose_max_tokens": 32768}
"""Direct (App. A.1): "one full-story call per attempt with a 32,768-token output limit"."""


class StoryTarget(WritingControls):
    """What every chapter-based method is asked to write: the prompt and its length."""

    PROSE_ROLES: ClassVar[frozenset[str]] = frozenset({"nst_prose", "rollsum_chapter", "direct_story"})
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {
        "small": {
            "prose_sampling": SMALL_PROSE_LONG_PROMPTS,
            "structured_sampling": SMALL_STRUCTURED_LONG_PROMPTS,
            "min_tokens": True,
            "trim_cut_drafts": True,
        },
        "paper": PAPER_DIRECT,
    }

    prompt: str = Field(min_length=1, max_length=200_000)
    prompt_id: str | None = None
    language: str | None = Field(None, max_length=40)
    """The language to write in (``--language``); None: the prompt's own (``agent.language.detect``)."""
    words: int = Field(ge=1, le=MAX_WORDS)
    """The story's length; ``fabula write`` asks for at least MIN_WORDS, tests and benchmarks may go lower."""
    temperature: float = Field(0.7, ge=0.0, le=2.0)
    gate_low: float = Field(DEFAULT_LOW, gt=0.0, le=1.0)
    gate_high: float = Field(DEFAULT_HIGH, ge=1.0, le=3.0)
    tokens_per_word: float | None = Field(None, gt=0.1, le=10.0)
    """Initial tokens-per-word estimate; None: 1.4 (Latin) or 1.5 (CJK), then measured."""
    min_tokens: bool = True
    """Ask the backend for a floor on prose tokens sized from the gate."""
    prose_max_tokens_cap: int = Field(32768, ge=64, le=TOKEN_CAP)
    prose_max_tokens: int | None = Field(None, ge=64, le=TOKEN_CAP)
    """A fixed prose ceiling, the paper's; None: sized from the gate (1.25 x the range's top in tokens
    + 64, under ``prose_max_tokens_cap``). Either way fitted to the context."""
    trim_cut_drafts: bool = False
    """A draft cut at max_tokens is cut back to its last complete sentence and accepted if it then
    lies inside the gate (recorded as trimmed). Off by default: the papers reject a cut draft."""
    context_tokens: int | None = Field(None, ge=512, le=TOKEN_CAP)
    """The model's context (--context-tokens); None: the server's max_model_len, else the embedded
    model's config, else unknown (nothing budgeted). Every request is fitted to it (agent.llm.budget)."""
    context_reserve: int = Field(64, ge=0, le=16384)
    """Tokens kept free of every request (prompt + max_tokens <= context - reserve)."""

    def gate(self, target_words: int) -> Gate:
        """The length gate of a chapter (or story) of ``target_words``, at this run's bounds."""
        return Gate.for_target(target_words, self.gate_low, self.gate_high)

    @model_validator(mode="after")
    def _prompt_not_blank(self) -> Self:
        if not self.prompt.strip():
            raise ValueError("the story prompt is empty")
        return self


class Planned(StoryTarget):
    """Methods that write from the frozen outline (NstAgent, RollSum)."""

    outline_attempts: int = Field(3, ge=1, le=20)
    plan_cache: str | None = None
    """Folder; None: $FABULA_HOME/plans."""
    planner_max_tokens: int = Field(2048, ge=64, le=TOKEN_CAP)
    premise_from: int = Field(3_000, ge=0, le=MAX_WORDS + 1)
    """Stories of at least this many words get a premise stage (the reference: from 10K)."""
    synopsis_from: int = Field(10_001, ge=0, le=MAX_WORDS + 1)
    """... a synopsis stage (the reference: from 20K)."""
    acts_from: int = Field(40_000, ge=0, le=MAX_WORDS + 1)
    """... an act stage (the reference: from 100K)."""
    synopsis_words: bool = False
    """Ask the synopsis for the reference's ~1,000 words (~2,500 with the act stage)."""
    free_outline: bool = False
    """The paper's outline freedom: the planner may adjust the chapter count and give key chapters
    more words (the plain outline grammar); off, the grammar fixes the count and keeps each
    chapter within the gate around an even share. The validator judges the outline either way."""


SMALL_UPDATE_MAX_TOKENS = 512
"""The small profile's update budget: in seven real runs of SmolLM2-135M the one update accepted
was ~70 tokens and every parsed reply over 512 tokens (7 of 61) was refused, while the default
4,096 let runaways fill the context (docs/design/embedded-speed.md)."""


SMALL_FAILED_UPDATE_LIMIT = 1
"""The small profile takes the fallback update after one failed update attempt: in two 600-word
runs of SmolLM2-135M none of 20 update attempts was accepted (14 ran away or were cut, 6 refused),
and each further failed turn cost two failed calls, a runaway and its retry
(docs/design/embedded-speed.md)."""


class NstConfig(Planned):
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {
        "small": {
            **StoryTarget.PROFILES["small"],
            "min_past_events": 1,
            "update_max_tokens": SMALL_UPDATE_MAX_TOKENS,
            "failed_update_limit": SMALL_FAILED_UPDATE_LIMIT,
            "fallback_full_update": False,
        },
        "paper": PAPER_NST,
    }
    """The small profile also asks every state update for at least one past event: a tiny model's
    cheapest legal update is an empty one, and an empty chronology leaves later chapters nothing;
    it caps an update reply at :data:`SMALL_UPDATE_MAX_TOKENS`, takes the fallback after
    :data:`SMALL_FAILED_UPDATE_LIMIT` failed attempt, and the fallback asks for one event only (no
    full fallback update was accepted in three runs; half of them ran away, failed calls)."""

    state: bool = True
    """--no-state: no state, no update tool, no state guidance."""
    lookback: bool = True
    """--no-lookback: no read, search or correct."""
    max_turns: int = Field(50, ge=3, le=500)
    read_budget: int = Field(3, ge=0, le=100)
    search_budget: int = Field(5, ge=0, le=100)
    search_hits: int = Field(8, ge=1, le=100)
    search_style: Literal["fabula", "reference"] = "fabula"
    """How the search tool tokenizes, ranks and answers: "fabula", three weighted columns with stemming,
    ties toward earlier chapters, passages as text; "reference", as the NstAgent reference code (the
    centre's tokens three times in one column, no stemming, short query tokens dropped, ties toward later
    chapters, the hits as JSON). docs/design/search.md."""
    correct_budget: int = Field(3, ge=0, le=100)
    failed_call_budget: int = Field(5, ge=0, le=100)
    """Failed tool calls per chapter before only the required steps are offered."""
    required_after_failures: bool = True
    """Offer only the required steps once ``failed_call_budget`` is spent (fabula's; the reference has no such rule)."""
    fallback_update: bool = True
    """Ask for the update past the turn cap when a kept chapter has none (fabula's; the reference has none)."""
    fallback_full_update: bool = True
    """The fallback asks for the full update first, then one event if that fails; off: the one event only."""
    failed_update_limit: int = Field(3, ge=0, le=100)
    """Update attempts that fail in a row (refused, or a reply cut off or invalid while the update is
    on offer) end the chapter's turns: the fallback update is asked, then the chapter is kept
    (fabula's; 0: never, as the reference). A 135M model re-sent one refused update 25 times, and
    in another run let ten updates in a row run away, until its context was full."""
    atomic_update: bool = False
    """All or nothing (paper Eq. 6): one refused entry refuses the update, and no second update is offered."""
    tool_max_tokens: int = Field(512, ge=16, le=TOKEN_CAP)
    update_max_tokens: int = Field(4096, ge=64, le=TOKEN_CAP)
    min_past_events: int = Field(0, ge=0, le=10)
    """Past events every update must add (the grammar's minimum). The paper allows none when
    nothing changed; 1 may help a tiny model whose cheapest legal update is an empty one."""
    evidence: bool = True
    """Every new or changed state entry quotes the accepted chapter; an entry whose quote does not
    occur there is refused (the rest applies) and the model may retry the refused ones once."""
    arc_chapters: int = Field(5, ge=1, le=100)
    """Chapters per arc: past events of old arcs are consolidated into one digest per arc when the
    budget is tight (the recent events stay verbatim; every event stays in the state)."""
    state_share: float = Field(0.25, gt=0.0, le=1.0)
    """Largest share of the context the rendered state may take before older arcs are digested."""
    digest_max_tokens: int = Field(400, ge=32, le=TOKEN_CAP)


class RollSumConfig(Planned):
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {"small": StoryTarget.PROFILES["small"], "paper": PAPER_ROLLSUM}

    chapter_attempts: int = Field(50, ge=1, le=100)
    """The reference code's 50 attempts per chapter."""
    summary_max_tokens: int = Field(16384, ge=64, le=TOKEN_CAP)
    reference_prompts: bool = False
    """The reference's RollSum prompts: the summary call sees the story prompt and keeps what later
    chapters need in its own words, and the chapter asks for the target itself, no later chapter.
    Off: fabula's (the summary keeps a list of facts: names, ages, dates, places, ...)."""


class DirectConfig(StoryTarget):
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {"small": StoryTarget.PROFILES["small"], "paper": PAPER_DIRECT}

    attempts: int = Field(10, ge=1, le=100)
    """The reference code's 10 attempts."""
    min_tokens: bool = False
    """No floor by default: the paper measures Direct's difficulty reaching the length unaided."""


NST_DEFAULTS: dict[str, Any] = NstConfig.defaults()
ROLLSUM_DEFAULTS: dict[str, Any] = RollSumConfig.defaults()
DIRECT_DEFAULTS: dict[str, Any] = DirectConfig.defaults()
