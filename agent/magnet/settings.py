"""Every knob of a Magnet run, typed, with the paper's defaults; all of it is stored in the run.

Temperatures are Appendix A.1's; the 15/40 thresholds and the revision maximum are
Section 3's. What the paper leaves open (history window, token budgets, ending window)
has a default chosen for small local models, and is recorded like the rest. Ranges are
checked once, when a run is configured: ``shift_every=0`` or ``history_window=0`` is refused
with one line instead of dividing by zero or sending the whole story.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from agent.settings import SMALL_PROSE, SMALL_STRUCTURED, WritingControls

TOKENS = 32768
CONTEXT_CAP = 262_144
"""No model fabula serves has a longer context; a larger setting is a typo."""
PROSE = frozenset({"narrator", "transition", "baseline"})
"""The roles that write story text (the rest answer in JSON)."""
SMALL = {"prose_sampling": SMALL_PROSE, "structured_sampling": SMALL_STRUCTURED}


class ParagraphSettings(WritingControls):
    """What Magnet and its single-model baseline share: paragraph budgets, history, ending, retries
    (declared once, so both pipelines check the same ranges)."""

    PROSE_ROLES: ClassVar[frozenset[str]] = PROSE
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {"small": SMALL}

    baseline_temperature: float = Field(0.35, ge=0.0, le=2.0)
    history_window: int = Field(3, ge=1, le=50)
    """Recent story paragraphs every role sees."""
    paragraph_tokens: int = Field(320, ge=16, le=TOKENS)
    paragraph_min_tokens: int = Field(60, ge=1, le=TOKENS)
    ending_paragraphs: int = Field(4, ge=1, le=100)
    """Steer to a concluding goal when this many paragraphs' worth of words remain."""
    max_steps_factor: float = Field(3.0, ge=1.0, le=20.0)
    """Hard bound on timesteps: factor x (target words / paragraph_min_tokens); hit is recorded."""
    retries: int = Field(1, ge=0, le=10)
    """Re-asks of one failed model call (a truncated or invalid reply) before giving up on it."""


class MagnetSettings(ParagraphSettings):
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {"small": {**SMALL, "critic_example": True}}

    character_temperature: float = Field(0.2, ge=0.0, le=2.0)
    critic_temperature: float = Field(0.1, ge=0.0, le=2.0)
    narrator_temperature: float = Field(0.35, ge=0.0, le=2.0)
    goal_temperature: float = Field(0.1, ge=0.0, le=2.0)
    max_revisions: int = Field(3, ge=0, le=20)
    stall_steps: int = Field(15, ge=1, le=10_000)
    shift_every: int = Field(40, ge=1, le=10_000)
    action_tokens: int = Field(160, ge=16, le=TOKENS)
    critic_tokens: int = Field(400, ge=16, le=TOKENS)
    selection_tokens: int = Field(80, ge=8, le=TOKENS)
    goal_tokens: int = Field(120, ge=16, le=TOKENS)
    transition_tokens: int = Field(220, ge=16, le=TOKENS)
    recall_paragraphs: int = Field(3, ge=0, le=20)
    """Long-range memory: earlier paragraphs recalled per step by BM25 (0: none)."""
    recall_words: int = Field(90, ge=10, le=2000)
    """Each recalled paragraph is cut to this many words, so recall has a fixed bound."""
    recap_every: int = Field(8, ge=0, le=1000)
    """Refresh the running recap every N steps by one bounded call (0: no recap)."""
    recap_tokens: int = Field(220, ge=16, le=TOKENS)
    recap_temperature: float = Field(0.1, ge=0.0, le=2.0)
    context_tokens: int | None = Field(None, ge=512, le=CONTEXT_CAP)
    """The model's context; None: the server's max_model_len, else the embedded model's config, else
    unknown (nothing fitted). Every request is fitted to it, memory giving way first (agent.magnet.roles)."""
    context_reserve: int = Field(64, ge=0, le=16384)
    """Tokens kept free of every request (prompt + max_tokens <= context - reserve)."""
    critic_example: bool = False
    """End the critic's instructions with one complete example reply. Off by default (the paper's
    prompt has none); the small profile turns it on: replaying the demo's three critic prompts on
    the 135M model (three seeds each), 3 of 9 replies ran away (digits and junk in ``feedback``)
    without an example, 1 of 9 with one."""
    critic: bool = True
    goal_shift: bool = True
    structured_state: bool = True

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> MagnetSettings:
        """The settings part of a stored configuration (other keys, such as the story, ignored)."""
        return cls.parse({k: v for k, v in config.items() if k in cls.model_fields})

    def as_config(self) -> dict[str, Any]:
        return self.stored()

    def ablations(self) -> list[str]:
        return [name for name, on in (("no-critic", self.critic), ("no-goal-shift", self.goal_shift),
                                      ("no-structured-state", self.structured_state)) if not on]


def _story_definition(value: Any) -> Any:
    """A stored story definition (``StoryDefinition.to_dict()``): ``--set story={}`` or ``[]`` on a
    resume or fork is refused here, not left to fail (or be ignored) later."""
    from agent.magnet.definition import StoryDefinition

    if not isinstance(value, dict) or not isinstance(value.get("characters"), list) or not value["characters"]:
        raise ValueError("must be a whole story definition (title, characters, ...), as read from a STORY.toml")
    try:
        StoryDefinition.from_dict(value)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"is not a story definition ({type(exc).__name__}: {exc})") from None
    return value


class MagnetConfig(MagnetSettings):
    """A Magnet run's whole configuration: the settings and the story definition."""

    story: dict[str, Any]

    _check_story = field_validator("story")(classmethod(lambda cls, value: _story_definition(value)))




class SingleConfig(ParagraphSettings):
    """The single-model baseline: the story definition and the settings it shares with Magnet."""

    story: dict[str, Any]

    _check_story = field_validator("story")(classmethod(lambda cls, value: _story_definition(value)))

    def magnet_settings(self) -> MagnetSettings:
        """The Magnet settings the shared helpers (ending, prose) read."""
        return MagnetSettings.from_config(self.model_dump(exclude={"story"}))
