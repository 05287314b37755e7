"""Typed pipeline settings and the one override syntax, ``--set KEY=VALUE``.

Each pipeline declares its settings as a :class:`Settings` model: every field has a type, a
default (the paper's, where it gives one) and a range. The stored configuration of a run is
such a model dumped to JSON, so validation happens once, in :meth:`Settings.parse`, for
``write`` and for ``resume --set`` alike: an unknown key or a value out of range is refused
with one line naming the setting, before anything is stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Self, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent import keyvalue
from agent.errors import ConfigError, InputError
from agent.limits import MAX_WORDS, MIN_WORDS
from agent.llm.sampling import Sampling


@dataclass(frozen=True)
class WordRange:
    """A range of story lengths in words, and the one-line refusals of a length outside it."""

    low: int
    high: int

    def __contains__(self, words: object) -> bool:
        return isinstance(words, int) and not isinstance(words, bool) and self.low <= words <= self.high

    def check_flag(self, words: int, flag: str = "--words") -> int:
        """``words`` as the command line gave it, or :class:`InputError` naming the flag and the range."""
        if words not in self:
            raise InputError(f"{flag} must be between {self.low} and {self.high}, got {words}")
        return words

    def without(self, written: int) -> WordRange:
        """The lengths still allowed once a run holds ``written`` words (``fabula continue``)."""
        return WordRange(self.low, self.high - written)


@dataclass(frozen=True)
class Source:
    """Where a setting's ``paper`` value comes from, declared on the setting itself as
    ``Annotated`` metadata; docs/profiles.md's tables are built from these (scripts/profiles_doc.py).

    ``where``: the paper section or the reference's file:line; ``reading``: what it says there;
    ``why``: why fabula's default differs from it ("" when it does not). The values themselves are
    read from the field's default and the ``PROFILES`` dicts, never repeated here. ``per``: the
    source for one pipeline (by registry name) of a setting that several pipelines share."""

    where: str
    reading: str
    why: str = ""
    per: tuple[tuple[str, Source], ...] = ()

    def but(self, **per: Source) -> Source:
        """This source, with another one for the pipelines named (``.but(rollsum=Source(...))``)."""
        return Source(self.where, self.reading, self.why, (*self.per, *per.items()))

    def of(self, pipeline: str) -> Source:
        """The source that applies to ``pipeline``."""
        return dict(self.per).get(pipeline, self)

    @property
    def own(self) -> bool:
        return self.where == OWN


OWN = "fabula's own"


def own(why: str) -> Source:
    """A setting with no paper value (fabula's own): ``why`` says what it is for."""
    return Source(OWN, "no paper value", why)


INPUT = own("the run's input, not a setting of the method")


def source_of(settings: type[BaseModel], name: str, pipeline: str) -> Source | None:
    """The declared source of setting ``name`` for ``pipeline``, or None when it has none."""
    found = [m for m in settings.model_fields[name].metadata if isinstance(m, Source)]
    return found[0].of(pipeline) if found else None


STORY_WORDS = WordRange(MIN_WORDS, MAX_WORDS)
"""The story lengths a user may ask for, however it is given (``--words``, ``--set words=``, a
batch, a resume, a fork, ``continue`` and ``sequel``): the one range, checked once where the value
is read. The settings type itself allows shorter stories (tests and benchmarks of tiny models
write 40-300 words)."""
USER_LIMITS: dict[str, WordRange] = {"words": STORY_WORDS}
"""Ranges a value given on the command line must meet on top of its settings type: every
``--set``/``--var`` door reads its pairs with :func:`parse_assignments`, which checks them."""

RESERVED = ("pipeline_version", "llm")
"""Keys of a stored configuration that belong to the registry, not to the pipeline's settings."""


class Settings(BaseModel):
    """Base of every pipeline's typed configuration: frozen, no unknown keys."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)

    @classmethod
    def parse(cls, values: Mapping[str, Any], *, owner: str | None = None) -> Self:
        """Validate ``values`` (reserved registry keys ignored); one-line ``ConfigError`` otherwise."""
        data = {k: v for k, v in values.items() if k not in RESERVED}
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(describe_validation(exc, cls, owner)) from None

    @classmethod
    def coerce(cls, value: Self | Mapping[str, Any]) -> Self:
        """A typed config from one of this class or a stored dict (what older callers pass)."""
        if isinstance(value, cls):
            return value
        return cls.parse(cast("Mapping[str, Any]", value))  # not Self, so by the signature a mapping

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every setting that has a default, as stored (required inputs such as the prompt excluded)."""
        values = {
            name: f.get_default(call_default_factory=True)
            for name, f in cls.model_fields.items()
            if not f.is_required()
        }
        return {k: v.model_dump(mode="json") if isinstance(v, BaseModel) else v for k, v in values.items()}

    @classmethod
    def known(cls) -> list[str]:
        return sorted(cls.model_fields)

    def stored(self) -> dict[str, Any]:
        """The JSON form kept in the run (and fingerprinted)."""
        return self.model_dump(mode="json")


def describe_validation(exc: ValidationError, cls: type[Settings], owner: str | None) -> str:
    """The first problem as one line: ``setting shift_every: must be >= 1 (got 0)``."""
    error = exc.errors()[0]
    key = ".".join(str(p) for p in error.get("loc", ())) or "?"
    of = f" for {owner}" if owner else ""
    if error.get("type") == "extra_forbidden":
        return f"unknown setting {key!r}{of}; known: {', '.join(cls.known())}"
    if error.get("type") == "missing":
        return f"setting {key}{of} is required"
    if not error.get("loc"):  # a rule across settings (a model validator): its own words
        return f"settings{of}: {str(error.get('msg', 'invalid')).removeprefix('Value error, ')}"
    message = (
        str(error.get("msg", "invalid"))
        .replace("Input should be", "must be")
        .replace("greater than or equal to", ">=")
        .replace("less than or equal to", "<=")
    )
    got = error.get("input")
    shown = json.dumps(got) if isinstance(got, str | int | float | bool | None) else type(got).__name__
    more = f" (and {len(exc.errors()) - 1} more problem(s))" if len(exc.errors()) > 1 else ""
    return f"setting {key}{of}: {message} (got {shown[:60]}){more}"


def parse_assignments(items: Iterable[str], *, flag: str = "--set") -> dict[str, Any]:
    """``KEY=VALUE`` pairs; VALUE is JSON (number, true/false, null, list), else a plain string.

    A VALUE that starts as JSON does (``{``, ``[``, ``"``) must be JSON: ``x={"a":`` is refused,
    not stored as the string it happens to be. Every ``--set``/``--var`` door reads pairs here."""
    out: dict[str, Any] = {}
    for item in items:
        pair = keyvalue.split(item)
        if pair is None:
            raise ConfigError(f"{flag} needs KEY=VALUE, got {item!r}")
        key, raw = pair
        if key in out:
            raise ConfigError(f"{flag} {key} is given twice")
        try:
            out[key] = keyvalue.value(raw)
        except keyvalue.MalformedValue as exc:
            raise ConfigError(f"{flag} {key}: {exc}") from None
        check_user_value(key, out[key], flag=flag)
    return out


def check_user_value(key: str, value: Any, *, flag: str = "--set") -> None:
    """A user-given setting inside :data:`USER_LIMITS` (the same range as its own flag checks)."""
    limits = USER_LIMITS.get(key)
    if limits is not None and value not in limits:
        raise ConfigError(
            f"setting {key} ({flag}): must be a whole number between {limits.low} and {limits.high}, "
            f"got {json.dumps(value)[:40]}"
        )


MAGNET_SAMPLING = Source("Magnet App. A.1", "a temperature per role, nothing else")
SAMPLING = Source(
    "NstAgent App. A.1; reference agent_core.py:3402 `LongStoryAgent._llm`, generation_common.py:115 `chat_completion`",
    "a temperature, nothing else (the reference sends `temperature` and `max_tokens` only)",
).but(magnet=MAGNET_SAMPLING, single=MAGNET_SAMPLING)
"""The source of both sampling settings: the papers name a temperature and no other control."""


class WritingControls(Settings):
    """Sampling per kind of role, the repetition guard and the profile: shared by every pipeline.

    ``prose_sampling`` applies to the roles that write story text, ``structured_sampling`` to
    the roles that answer in JSON; both are empty by default (the papers' setting). The guard
    rejects a prose reply that repeats itself (``agent.repetition``). A profile is a named
    bundle of these and other settings (``PROFILES``), applied by ``--profile`` and recorded.
    """

    PROSE_ROLES: ClassVar[frozenset[str]] = frozenset()
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {}

    profile: Annotated[str, own("the bundle `--profile` applied, recorded with the run")] = "default"
    prose_sampling: Annotated[Sampling, SAMPLING] = Field(default_factory=Sampling)
    structured_sampling: Annotated[Sampling, SAMPLING] = Field(default_factory=Sampling)
    repetition_guard: Annotated[
        bool,
        Source(
            "NstAgent App. A.1; Magnet §3; reference agent_core.py:5040 `_tool_write`",
            "no repetition guard (the reference's write checks the length and the final punctuation only)",
            "small and quantized models loop; a looping reply is rejected and asked again",
        ),
    ] = True
    repetition_max_rate: Annotated[float, own("the guard's threshold (only with `repetition_guard`)")] = Field(
        0.35, gt=0.0, le=1.0
    )
    """A prose reply whose repeated-4-gram rate is above this is rejected."""
    repetition_max_span: Annotated[int, own("the guard's threshold (only with `repetition_guard`)")] = Field(
        24, ge=4, le=1000
    )
    """... as is one that repeats a passage of this many words word for word."""

    def sampling_for(self, role: str | None) -> Sampling:
        return self.prose_sampling if role in self.PROSE_ROLES else self.structured_sampling

    @classmethod
    def profile_settings(cls, name: str) -> dict[str, Any]:
        """The settings a profile switches on (each still a setting of its own, overridable)."""
        if name == "default":
            return {"profile": "default"}
        if name not in cls.PROFILES:
            raise ConfigError(f"unknown profile {name!r}; known: default, {', '.join(sorted(cls.PROFILES))}")
        return {**cls.PROFILES[name], "profile": name}


SMALL_MAX_STRING_CHARS = 300
"""The small profile closes a JSON string at 300 characters (``Sampling.max_string_chars``). In
the SmolLM2-135M runs kept on the development machine, the NstAgent family's 268 parsed tool and
update replies had a longest string of 14 characters at the median and 337 at the 95th percentile
(a search query copied from the chapter), while most failed replies of eight 600-word runs were one
string running on for 500-2,000 characters until ``max_tokens`` cut the reply; in Magnet 2.6 % of
349 critic reviews (a world-state value of 834 characters) and 5.4 % of 351 character actions
(asked for one or two sentences) passed 300 (docs/design/embedded-speed.md)."""
SMALL_MAGNET_STRING_CHARS = {"attribute": 40, "value": 80, "feedback": 160, "transition": None}
"""Magnet's small profile closes these fields sooner (``Sampling.max_string_chars_by_key``): in the
SmolLM2-135M critic reviews kept on the development machine (1,224 world updates, 535 reviews) an
attribute was at most 42 characters in 99 %, a value at most 47 in 95 % (a few were 300-771
characters of invented story, and the three reviews of a step, decoded together, wait for the
longest), a one-sentence feedback at most 149 in 95 %. A goal reply's ``transition`` is story
prose and is never closed early."""
SMALL_NST_STRING_CHARS = {
    "query": 120,
    "title": 80,
    "reason": 160,
    "key": 40,
    "value": 80,
    "name": 40,
    "location": 80,
    "goal": 160,
    "relationships": 160,
    "knowledge": 160,
    "possessions": 120,
    "condition": 120,
    "description": 200,
    "evidence": 200,
}
"""The NstAgent family's small profile closes these fields sooner (``correct``'s ``old`` and ``new``,
quotes to replace, keep :data:`SMALL_MAX_STRING_CHARS`): in the 811 parsed SmolLM2-135M tool
and update replies kept on the development machine, 95 % of a character's fields were under 55
characters (goal 135), keys under 20, events' descriptions under 333 and evidence under 284
(a prefix of a quote is still a quote), while the failed calls of twelve 600-word runs were
updates whose several junk fields together passed 512 tokens and search queries that ran on as
word salad until the runaway check stopped them (docs/design/embedded-speed.md)."""
SMALL_PROSE = {"repetition_penalty": 1.2, "frequency_penalty": 0.4, "presence_penalty": 0.2, "top_p": 0.9}
SMALL_STRUCTURED = {
    "repetition_penalty": 1.1,
    "frequency_penalty": 0.3,
    "max_string_chars": SMALL_MAX_STRING_CHARS,
    "max_string_chars_by_key": SMALL_MAGNET_STRING_CHARS,
}
"""The small-model profile's sampling for short prompts (Magnet's, about a thousand tokens, and its
320-token paragraphs): penalties that stop a 135M-1B model's loops on both backends. The
repetition penalty also keeps the narrator from copying the prompt's actions word for word.
Structured replies get a frequency penalty too: their loops are often inside one string (a
number's zeros, a "{ 100 }" run), which a repetition penalty of 1.1 barely slows; the grammar
leaves the structural tokens no choice, so the penalty only weighs on the free text; and a string
is closed at :data:`SMALL_MAX_STRING_CHARS` (the critic's short fields at :data:`SMALL_MAGNET_STRING_CHARS`)."""
SMALL_PROSE_LONG_PROMPTS = {"repetition_penalty": 1.1, "presence_penalty": 0.3, "frequency_penalty": 0.1, "min_p": 0.1}
SMALL_STRUCTURED_LONG_PROMPTS = {
    "frequency_penalty": 0.3,
    "min_p": 0.1,
    "max_string_chars": SMALL_MAX_STRING_CHARS,
    "max_string_chars_by_key": SMALL_NST_STRING_CHARS,
}
"""... and for long prompts and long replies (the NstAgent family: chapters of 500+ words, prompts
that hold earlier chapters): no repetition penalty on tool calls and a light one on prose, since it
weighs on every prompt token too; a small frequency penalty; ``min_p`` 0.1 against salad when
sampling; JSON strings closed at :data:`SMALL_MAX_STRING_CHARS` (short fields at
:data:`SMALL_NST_STRING_CHARS`). Why, measured on the tiny model:
docs/design/small-model-sampling.md."""
