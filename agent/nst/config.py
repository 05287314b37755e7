"""Every setting of the NstAgent pipeline and its baselines, typed, with the paper's defaults.

The whole configuration is stored (and fingerprinted) with the run, so a resume with different
settings is refused unless forced, and every figure can be traced to the settings behind it.
Ranges are checked once, when a run is configured (``agent.settings.Settings.parse``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import Field, model_validator

from agent.gate import DEFAULT_HIGH, DEFAULT_LOW, Gate
from agent.limits import MAX_WORDS, TOKEN_CAP
from agent.settings import SMALL_PROSE_LONG_PROMPTS, SMALL_STRUCTURED_LONG_PROMPTS, WritingControls

PLANNER_VERSION = "2"
"""2: the outline stage also asks for the book's title (a version-1 cached plan has none)."""


class StoryTarget(WritingControls):
    """What every chapter-based method is asked to write: the prompt and its length."""

    PROSE_ROLES: ClassVar[frozenset[str]] = frozenset({"nst_prose", "rollsum_chapter", "direct_story"})
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {"small": {
        "prose_sampling": SMALL_PROSE_LONG_PROMPTS, "structured_sampling": SMALL_STRUCTURED_LONG_PROMPTS,
        "min_tokens": True,
        "trim_cut_drafts": True}}

    prompt: str = Field(min_length=1, max_length=200_000)
    prompt_id: str | None = None
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
    trim_cut_drafts: bool = False
    """A draft cut at max_tokens is cut back to its last complete sentence and accepted if it then
    lies inside the gate (recorded as trimmed). Off by default: the papers reject a cut draft."""
    context_tokens: int | None = Field(None, ge=512, le=TOKEN_CAP)
    """The model's context (--context-tokens); None: the server's max_model_len, else the embedded
    model's config, else unknown (nothing budgeted). Every request is fitted to it (agent.nst.budget)."""
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


class NstConfig(Planned):
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {"small": {**StoryTarget.PROFILES["small"], "min_past_events": 1}}
    """The small profile also asks every state update for at least one past event: a tiny model's
    cheapest legal update is an empty one, and an empty chronology leaves later chapters nothing."""

    state: bool = True
    """--no-state: no state, no update tool, no state guidance."""
    lookback: bool = True
    """--no-lookback: no read, search or correct."""
    max_turns: int = Field(50, ge=3, le=500)
    read_budget: int = Field(3, ge=0, le=100)
    search_budget: int = Field(5, ge=0, le=100)
    search_hits: int = Field(8, ge=1, le=100)
    correct_budget: int = Field(3, ge=0, le=100)
    failed_call_budget: int = Field(5, ge=0, le=100)
    """Failed tool calls per chapter before only the required steps are offered."""
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
    chapter_attempts: int = Field(50, ge=1, le=100)
    """The reference code's 50 attempts per chapter."""
    summary_max_tokens: int = Field(16384, ge=64, le=TOKEN_CAP)


class DirectConfig(StoryTarget):
    attempts: int = Field(10, ge=1, le=100)
    """The reference code's 10 attempts."""
    min_tokens: bool = False
    """No floor by default: the paper measures Direct's difficulty reaching the length unaided."""


NST_DEFAULTS: dict[str, Any] = NstConfig.defaults()
ROLLSUM_DEFAULTS: dict[str, Any] = RollSumConfig.defaults()
DIRECT_DEFAULTS: dict[str, Any] = DirectConfig.defaults()
