"""Every knob of a Magnet run, typed, with the paper's defaults; all of it is stored in the run.

Temperatures are Appendix A.1's; the 15/40 thresholds and the revision maximum are
Section 3's. What the paper leaves open (history window, token budgets, ending window)
has a default chosen for small local models, and is recorded like the rest. Each role's token
budget is the size of its answer; a call's ``max_tokens`` is that answer plus ``reasoning_tokens``
(0 but under ``paper``, whose model may think first: :meth:`ParagraphSettings.ceiling`). Ranges are
checked once, when a run is configured: ``shift_every=0`` or ``history_window=0`` is refused
with one line instead of dividing by zero or sending the whole story.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BeforeValidator,
    Field,
    InstanceOf,
    PrivateAttr,
    SerializationInfo,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_validator,
)

from agent.limits import TOKEN_CAP
from agent.magnet.definition import StoryDefinition
from agent.settings import INPUT, SMALL_PROSE, SMALL_STRUCTURED, Settings, Source, WritingControls, own

TOKENS = 32768
PROSE = frozenset({"narrator", "transition", "baseline"})
"""The roles that write story text (the rest answer in JSON)."""
SMALL = {"prose_sampling": SMALL_PROSE, "structured_sampling": SMALL_STRUCTURED, "close_at_length": True}
REASONING_TOKENS = 32768
"""The room ``paper`` gives a thinking model's reasoning on every Magnet call (``reasoning_tokens``)."""
PAPER_PARAGRAPHS = {"repetition_guard": False, "paragraph_floor": False, "reasoning_tokens": REASONING_TOKENS}
"""The paper profile (``agent.settings``): Magnet and its baseline as the paper describes them. The paper
sends no prose floor and guards no repetition; both are fabula's additions. Its model may think (its
thinking is ``auto``), so every call leaves room for the reasoning before the answer."""
PAPER_MAGNET = {
    **PAPER_PARAGRAPHS,
    "recall_paragraphs": 0,
    "recap_every": 0,
    "narrator_rejects_updates": False,
    "narrator_calls": 1,
    "goal_calls": 1,
    "role_inputs": "paper",
}
"""... and Magnet's roles see the recent history only (Section 3: no BM25 recall, no recap), the
narrator selects and orders actions without vetting single world updates and writes the paragraph in
the same call, the goal generator writes the new goal and the transition in one call, and each role gets
the inputs Section 3.2 lists for it (the critic no story paragraphs, the narrator no personas)."""


TOKENS_OWN = own(
    "the paper gives no token caps; the size of the role's answer, for small local models (every profile keeps "
    "it: under `paper` a call's ceiling is it plus `reasoning_tokens`)"
)
"""The source of every Magnet answer size."""
REASONING = Source(
    "Magnet §3.2",
    "no token limit on any call: each role is a model behind an API (Gemma-4-31B-it, a Gemini 2.5 Flash critic, "
    "which thinks by default, Opus 4.7), answering at the length it needs. fabula's paper profile today: every "
    "call's ceiling is its answer's size plus 32,768 tokens for a thinking model's reasoning, the output length "
    "Qwen3's model card recommends for most queries (reasoning and answer together), so a Qwen3 model thinking "
    "by default (`thinking` auto) is never cut; a ceiling only, the run's context still clamps every call "
    "(issue 33)",
    "the default's model does not think (`thinking` off): a call asks for its answer's size only, so a runaway "
    "reply stops early",
).but(
    single=Source(
        "Magnet §4.2",
        "no token limit on the baseline's call. fabula's paper profile today: its one prompt keeps "
        "`single_max_tokens` (32,768, the reasoning and the story together); paragraph by paragraph "
        "(`single_prompt` off) each call's ceiling is the paragraph plus 32,768 tokens for a thinking model's "
        "reasoning, the output length Qwen3's model card recommends for most queries (issue 33)",
        "the default's model does not think (`thinking` off): a call asks for its paragraph's size only",
    )
)
"""The source of ``reasoning_tokens``."""


class ParagraphSettings(WritingControls):
    """What Magnet and its single-model baseline share: paragraph budgets, history, ending, retries
    (declared once, so both pipelines check the same ranges)."""

    PROSE_ROLES: ClassVar[frozenset[str]] = PROSE
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {"small": SMALL, "paper": PAPER_PARAGRAPHS}

    baseline_temperature: Annotated[float, Source("Magnet App. A.1", "0.35 for the baseline model")] = Field(
        0.35, ge=0.0, le=2.0
    )
    history_window: Annotated[
        int,
        own(
            'how many recent paragraphs every role sees: the paper\'s "recent story history" has no count (Magnet §3.2)'
        ),
    ] = Field(3, ge=1, le=50)
    """Recent story paragraphs every role sees."""
    paragraph_tokens: Annotated[int, TOKENS_OWN] = Field(320, ge=16, le=TOKENS)
    """A paragraph's size (its ceiling, with ``reasoning_tokens``); the closing paragraph is sized from it, and
    before the first paragraph the words one holds are estimated from it (``agent.magnet.ending``)."""
    reasoning_tokens: Annotated[int, REASONING] = Field(0, ge=0, le=TOKEN_CAP)
    """Room for a thinking model's reasoning, added to every call's answer size (:meth:`ceiling`): a ceiling
    only, never a length asked for (no floor and no closing paragraph is sized from it)."""
    paragraph_min_tokens: Annotated[
        int, own("the floor sent with `paragraph_floor`, and the unit of the step bound")
    ] = Field(60, ge=1, le=TOKENS)
    paragraph_floor: Annotated[
        bool, Source("Magnet §3.2", "no floor on a paragraph", "stops empty paragraphs from small models")
    ] = True
    """Send ``paragraph_min_tokens`` as the prose floor (fabula's; off in the paper profile: the
    length still bounds the steps through ``max_steps_factor``)."""
    close_at_length: Annotated[
        bool,
        own(
            "the closing paragraph ends at its first sentence end once the story holds its length; the paper's "
            "stories have no target length"
        ),
    ] = False
    """Cut the closing paragraph at its first sentence end once the story holds ``target_words``
    (``Sampling.close_after_words``: decoding stops there in the in-process engines; a server's reply
    is not cut). Off by default: a model that ends its own paragraph writes its close within the
    closing budget. The small profile turns it on: the 135M model never ends its closing paragraph,
    it wrote every kept demo story's to the budget's ceiling (350 tokens, about 270 words for 200)."""
    ending_paragraphs: Annotated[
        int, own("when to steer to a concluding goal; the paper gives no ending rule for a target length")
    ] = Field(4, ge=1, le=100)
    """Steer to a concluding goal when this many paragraphs' worth of words remain."""
    max_steps_factor: Annotated[float, own("a hard bound on timesteps for a target length")] = Field(
        3.0, ge=1.0, le=20.0
    )
    """Hard bound on timesteps: factor x (target words / paragraph_min_tokens); hit is recorded."""
    retries: Annotated[int, own("re-asks of one truncated or invalid reply")] = Field(1, ge=0, le=10)
    """Re-asks of one failed model call (a truncated or invalid reply) before giving up on it."""

    def ceiling(self, answer: int) -> int:
        """The ``max_tokens`` of a call whose answer is ``answer`` tokens: the answer and the room for
        reasoning before it (``reasoning_tokens``); fitted to the context afterwards, as every request is."""
        return answer + self.reasoning_tokens


class MagnetSettings(ParagraphSettings):
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {"small": {**SMALL, "critic_example": True}, "paper": PAPER_MAGNET}

    character_temperature: Annotated[float, Source("Magnet App. A.1", "0.2 for the character agents")] = Field(
        0.2, ge=0.0, le=2.0
    )
    critic_temperature: Annotated[float, Source("Magnet App. A.1", "0.1 for the critic")] = Field(0.1, ge=0.0, le=2.0)
    narrator_temperature: Annotated[float, Source("Magnet App. A.1", "0.35 for the narrator")] = Field(
        0.35, ge=0.0, le=2.0
    )
    goal_temperature: Annotated[float, Source("Magnet App. A.1", "0.1 for the goal generator")] = Field(
        0.1, ge=0.0, le=2.0
    )
    max_revisions: Annotated[
        int, own("the paper names a maximum of critic revisions (`MAX_REVISIONS`, Magnet §3.2) but no number")
    ] = Field(3, ge=0, le=20)
    stall_steps: Annotated[int, Source("Magnet §3.1", "a goal not completed in 15 steps is replaced")] = Field(
        15, ge=1, le=10_000
    )
    shift_every: Annotated[
        int, Source("Magnet §3.1", "a goal that shifts the story to a new domain every 40 steps")
    ] = Field(40, ge=1, le=10_000)
    action_tokens: Annotated[int, TOKENS_OWN] = Field(160, ge=16, le=TOKENS)
    critic_tokens: Annotated[int, TOKENS_OWN] = Field(400, ge=16, le=TOKENS)
    selection_tokens: Annotated[int, TOKENS_OWN] = Field(80, ge=8, le=TOKENS)
    goal_tokens: Annotated[int, TOKENS_OWN] = Field(120, ge=16, le=TOKENS)
    transition_tokens: Annotated[int, TOKENS_OWN] = Field(220, ge=16, le=TOKENS)
    recall_paragraphs: Annotated[
        int,
        Source(
            "Magnet §3.2",
            "the roles see the recent story history only",
            "BM25 recall of earlier paragraphs keeps long stories in a small context",
        ),
    ] = Field(3, ge=0, le=20)
    """Long-range memory: earlier paragraphs recalled per step by BM25 (0: none)."""
    recall_words: Annotated[int, own("the length of one recalled paragraph (with `recall_paragraphs`)")] = Field(
        90, ge=10, le=2000
    )
    """Each recalled paragraph is cut to this many words, so recall has a fixed bound."""
    recap_every: Annotated[
        int,
        Source(
            "Magnet §3.2",
            "no recap: the roles see the recent story history only",
            "a running recap every 8 steps keeps long stories in a small context",
        ),
    ] = Field(8, ge=0, le=1000)
    """Refresh the running recap every N steps by one bounded call (0: no recap)."""
    recap_tokens: Annotated[int, own("the budget of one recap call (with `recap_every`)")] = Field(
        220, ge=16, le=TOKENS
    )
    recap_temperature: Annotated[float, own("the recap call's temperature (with `recap_every`)")] = Field(
        0.1, ge=0.0, le=2.0
    )
    narrator_rejects_updates: Annotated[
        bool,
        Source(
            "Magnet §3.2-3.3",
            "the narrator selects and orders actions; updates of actions it leaves out never apply",
            "conflicting single world updates never reach the world graph",
        ),
    ] = True
    """The narrator may reject single proposed world updates (fabula's; the paper's narrator selects
    and orders actions only)."""
    narrator_calls: Annotated[
        Literal[1, 2],
        Source(
            "Magnet §3.2",
            "one narrator call selects and orders the actions and writes the paragraph with them",
            "the paragraph is plain text, written without a grammar, and a paragraph cut at its limit is trimmed "
            "to its last whole sentence instead of failing the call",
        ),
    ] = 2
    """2: the narrator selects and orders the actions in one JSON call, then writes the paragraph as
    plain text in a second; 1 (the paper's): one grammar-constrained reply carries the selection and the
    paragraph, within ``selection_tokens + paragraph_tokens``. A JSON reply takes no decoding floor, so 1
    needs ``paragraph_floor`` off; a reply cut at its limit is a failed call (re-asked), not trimmed."""
    goal_calls: Annotated[
        Literal[1, 2],
        Source(
            "Magnet §3.2",
            "the goal generator writes the new goal and the transition paragraph in the same call, "
            "from the previous goal, recent paragraphs, world state, all personas and all prior goals",
            "the transition is plain text in its own call, trimmed to its last whole sentence when cut",
        ),
    ] = 2
    """2: the goal call returns the goal, and a second plain-text call (which sees no world state) writes
    the transition; 1 (the paper's): one reply carries the goal and the transition, written from what the
    goal call sees, within ``goal_tokens + transition_tokens``."""
    role_inputs: Annotated[
        Literal["fabula", "paper"],
        Source(
            "Magnet §3.2",
            "each role gets what §3.2 lists: the character agent its persona, the goal, the recent story and the "
            "world variables relevant to it; the critic the action, the character's persona, the goal and the "
            "world state; the narrator the actions, the world state, the goal and the prior paragraphs; the goal "
            "generator the previous goal, the recent paragraphs, the world state, all personas and all prior goals",
            "the critic and the narrator share one view of the step (the story's recent paragraphs and every "
            "persona among it), the same system message for each, so a local engine reuses its cached prefix",
        ),
    ] = "fabula"
    """What the critic and the narrator see (:mod:`agent.magnet.prompts`). ``paper``: the critic no story
    paragraphs, recap, recalled passages or other personas (its context is the definition, the world state
    and the goal); the narrator no personas. The character agent and the goal generator see what the paper
    lists under both (the goal generator: every prior goal)."""
    context_tokens: Annotated[int | None, own("the model's context, which every request is fitted to")] = Field(
        None, ge=512, le=TOKEN_CAP
    )
    """The model's context; None: the server's max_model_len, else the embedded model's config, else
    unknown (nothing fitted). Every request is fitted to it, memory giving way first (agent.magnet.roles)."""
    context_reserve: Annotated[int, own("tokens kept free of every request")] = Field(64, ge=0, le=16384)
    """Tokens kept free of every request (prompt + max_tokens <= context - reserve)."""
    critic_example: Annotated[
        bool, Source("Magnet §3.2", "the critic is told what to judge; no example reply is described")
    ] = False
    """End the critic's instructions with one complete example reply. Off by default (the paper's
    prompt has none); the small profile turns it on: replaying the demo's three critic prompts on
    the 135M model (three seeds each), 3 of 9 replies ran away (digits and junk in ``feedback``)
    without an example, 1 of 9 with one."""
    critic: Annotated[bool, Source("Magnet §4.4", "the method has the critic; without it is an ablation")] = True
    goal_shift: Annotated[bool, Source("Magnet §4.4", "the method updates its goals; without it is an ablation")] = True
    structured_state: Annotated[
        bool, Source("Magnet §4.4", "the method keeps the structured state; without it is an ablation")
    ] = True

    @field_validator("narrator_calls")
    @classmethod
    def _one_call_takes_no_floor(cls, calls: int, info: ValidationInfo) -> int:
        if calls == 1 and info.data.get("paragraph_floor"):
            raise ValueError("one narrator call is a JSON reply, which takes no prose floor: set paragraph_floor=false")
        return calls

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> MagnetSettings:
        """The settings part of a stored configuration (other keys, such as the story, ignored)."""
        return cls.parse({k: v for k, v in config.items() if k in cls.model_fields})

    def as_config(self) -> dict[str, Any]:
        return self.stored()

    def ablations(self) -> list[str]:
        return [
            name
            for name, on in (
                ("no-critic", self.critic),
                ("no-goal-shift", self.goal_shift),
                ("no-structured-state", self.structured_state),
            )
            if not on
        ]


def _story(value: Any) -> StoryDefinition:
    """A story definition from its stored form (or as it is)."""
    if isinstance(value, StoryDefinition):
        return value
    if not isinstance(value, Mapping):
        raise ValueError("a story definition (a table of title, genre, goal, characters, ...) is needed")
    try:
        return StoryDefinition.from_dict(dict(value))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a story definition ({type(exc).__name__}: {exc})") from None


class StoryInput(Settings):
    """A pipeline that writes from a story definition: ``story`` is typed (a
    :class:`~agent.magnet.definition.StoryDefinition`, checked on every parse) and stored as it
    was given, so a run written before a field was added keeps its configuration and fingerprint."""

    story: Annotated[InstanceOf[StoryDefinition], BeforeValidator(_story), INPUT]
    _stored_story: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_stored_story(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        model = handler(data)
        raw = data.get("story") if isinstance(data, Mapping) else None
        model._stored_story = dict(raw) if isinstance(raw, Mapping) else model.story.to_dict()
        return model

    @field_serializer("story")
    def _dump_story(self, story: StoryDefinition, info: SerializationInfo) -> dict[str, Any]:
        return self._stored_story or story.to_dict()


class MagnetConfig(StoryInput, MagnetSettings):
    """A Magnet run's whole configuration: the settings and the story definition."""


class SingleConfig(StoryInput, ParagraphSettings):
    """The single-model baseline: the story definition and the settings it shares with Magnet."""

    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {
        "small": SMALL,
        "paper": {**PAPER_PARAGRAPHS, "single_prompt": True},
    }

    single_prompt: Annotated[
        bool,
        Source(
            "Magnet §4.2",
            "one prompt writes the whole story from the definition",
            "a local model rarely writes 10,000 words in one reply: the story continues one paragraph per step",
        ),
    ] = False
    """The paper's baseline (§4.2): one prompt, one call for the whole story (``agent.magnet.single_prompt``).
    Off: the story continues one paragraph per step (a local model rarely writes it in one reply)."""
    single_max_tokens: Annotated[
        int, own("the one call's ceiling under `single_prompt`: the paper gives none, 32,768 as NstAgent's Direct")
    ] = Field(TOKENS, ge=256, le=TOKEN_CAP)
    """That call's ceiling, fitted to the context (the paper gives none: 32,768, NstAgent's Direct's); it holds the
    reasoning too (``reasoning_tokens`` is not added: the whole story is the answer)."""

    def magnet_settings(self) -> MagnetSettings:
        """The Magnet settings the shared helpers (ending, prose) read."""
        return MagnetSettings.from_config(self.model_dump(exclude={"story"}))
