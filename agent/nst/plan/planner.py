"""The planner: premise, synopsis and act outline by target length, then the JSON chapter outline.

Each stage is fed the story prompt and the previous stage; the chapter outline stage is also
fed the premise (the reference code keeps it; a synopsis alone drops its cast and ending).
Every stage's request is fitted to the context (``agent.llm.budget``). The chapter outline (with the
book's title) is validated (non-empty, chapters numbered 1..n, positive targets summing to within ±20% of the total)
and re-asked with the error a bounded number of times; the plan is then frozen and cached. Under
``outline_style`` "reference" (the ``paper`` profile) the outline is asked, read and re-asked as the
NstAgent reference does it (``agent.nst.plan.reference``) and converted to the same plan.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from agent.errors import FabulaError
from agent.gate import DEFAULT_HIGH, DEFAULT_LOW, Gate, bounds
from agent.llm import LLM, JsonSchema, OutputValidationError, TruncatedOutputError
from agent.llm.budget import Budget
from agent.llm.types import Message
from agent.nst.plan import reference
from grammars.nst import Outline

ANCHORS = ((10_000, 10), (20_000, 15), (50_000, 25), (100_000, 40))
PREMISE_FROM = 3_000
"""Below this, the chapter outline alone (a two-chapter story needs no premise)."""
SYNOPSIS_ABOVE = 10_000
ACTS_FROM = 40_000


@dataclass(frozen=True)
class Stages:
    """Which planner stages run at which length, and what the synopsis and outline are asked for.

    The default is fabula's schedule; the ``paper`` profile sets the reference code's
    (``agent.nst.config.Planned``: ``premise_from``, ``synopsis_from``, ``acts_from``, ...)."""

    premise_from: int = PREMISE_FROM
    synopsis_from: int = SYNOPSIS_ABOVE + 1
    acts_from: int = ACTS_FROM
    synopsis_words: bool = False
    """Ask the synopsis for the reference's ~1,000 words (no acts stage) or ~2,500 (with acts)."""
    free_outline: bool = False
    """The reference's outline freedom: about N chapters, adjustable, key chapters may get more words."""
    outline_style: str = "fabula"
    """"reference": the reference's outline request, count and reply (:mod:`agent.nst.plan.reference`),
    free by itself (``free_outline`` shapes fabula's own outline only)."""

    def chapters_for(self, words: int) -> int:
        """The chapter count to plan: fabula's (:func:`chapter_count`) or the reference's (rounded up)."""
        return reference.chapter_count(words) if self.outline_style == "reference" else chapter_count(words)

    def for_words(self, words: int) -> list[str]:
        stages = []
        if words >= self.premise_from:
            stages.append("premise")
        if words >= self.synopsis_from:
            stages.append("synopsis")
        if words >= self.acts_from:
            stages.append("acts")
        return [*stages, "outline"]

    def synopsis_target(self, words: int) -> int | None:
        """The synopsis' word target (reference ``OutlineAgent.generate``: 1000 if 3 stages else 2500)."""
        if not self.synopsis_words or words < self.synopsis_from:
            return None
        return 2500 if words >= self.acts_from else 1000


SYSTEM = (
    "You are a novelist planning a long story. Follow the instructions exactly and write in the "
    "language of the story prompt."
)


class PlanError(FabulaError, RuntimeError):
    """The planner could not produce a valid outline within its bounded attempts."""


def chapter_count(words: int) -> int:
    """Chapters for a target length: the paper's anchors, linear between them; one per 1K words
    below 10K (at least 2), and the last slope beyond 100K."""
    if words <= ANCHORS[0][0]:
        return max(2, round(words / 1000))
    for (w0, c0), (w1, c1) in pairwise(ANCHORS):
        if words <= w1:
            return round(c0 + (c1 - c0) * (words - w0) / (w1 - w0))
    (w0, c0), (w1, c1) = ANCHORS[-2], ANCHORS[-1]
    return round(c1 + (c1 - c0) * (words - w1) / (w1 - w0))


def stages_for(words: int, stages: Stages | None = None) -> list[str]:
    return (stages or Stages()).for_words(words)


def validate_outline(
    outline: Outline,
    words: int,
    chapters: int,
    low: float = DEFAULT_LOW,
    high: float = DEFAULT_HIGH,
    *,
    strict: bool = False,
) -> list[dict[str, Any]]:
    """The outline's chapters as plain dicts, or ``ValueError`` naming the first broken rule.

    ``strict``: also the rules the narrowed grammar (:func:`outline_schema`) enforces while decoding,
    exactly ``chapters`` chapters and each target inside :func:`target_range`, for an outline no
    decoder constrained (a writer's edit, ``fabula outline --edit``); a model's reply keeps the slack."""
    items = outline.chapters
    if not outline.title.strip():
        raise ValueError("the outline has no title")
    if not items:
        raise ValueError("the outline has no chapters")
    ids = [c.id for c in items]
    if ids != list(range(1, len(items) + 1)):
        raise ValueError(f"chapter ids must be 1, 2, ..., {len(items)} in order; got {ids}")
    slack = 0 if strict else max(1, round(0.25 * chapters))
    if abs(len(items) - chapters) > slack:
        raise ValueError(f"the outline has {len(items)} chapters; write {chapters}")
    for c in items:
        if not c.title.strip() or not c.description.strip():
            raise ValueError(f"chapter {c.id} has an empty title or description")
        if c.target_words <= 0:
            raise ValueError(f"chapter {c.id} has a non-positive target ({c.target_words})")
    total = sum(c.target_words for c in items)
    gate = Gate.for_target(words, low, high)
    if not gate.accepts(total):
        raise ValueError(
            f"the chapter targets sum to {total} words; they must sum to between {gate.low} and "
            f"{gate.high} (the story is {words} words)"
        )
    if strict:
        lo, hi = target_range(words, chapters, low, high)
        for c in items:
            if not lo <= c.target_words <= hi:
                raise ValueError(
                    f"chapter {c.id} has a target of {c.target_words} words; each chapter's must be "
                    f"between {lo} and {hi} (around an even share of {round(words / chapters)})"
                )
    return [c.model_dump() for c in items]


def _stage_prompt(
    stage: str,
    prompt: str,
    previous: str | None,
    words: int,
    chapters: int,
    shape: Stages | None = None,
    low: float = DEFAULT_LOW,
    high: float = DEFAULT_HIGH,
) -> str:
    shape = shape or Stages()
    context = f"Story prompt:\n{prompt}\n"
    if previous:
        context += f"\nPlan so far:\n{previous}\n"
    if stage == "premise":
        task = (
            "Write the premise of this story in about 300 words: the protagonist and main cast, the setting, "
            "the central conflict, what is at stake, and how it ends. Plain prose, no headings."
        )
    elif stage == "synopsis":
        target = shape.synopsis_target(words)
        about = f" of about {target} words" if target else ""
        task = (
            f"Expand the premise into a detailed synopsis{about} of the whole {words}-word story, beginning to "
            "end, naming characters and places and keeping every plot thread. Plain prose."
        )
    elif stage == "acts":
        task = (
            f"Divide the synopsis into 3 to 5 acts. For each act give a heading line 'Act N: title' and a "
            f"paragraph of what happens; the acts together will span {chapters} chapters."
        )
    elif shape.outline_style == "reference":
        task = reference.request(words, chapters, low, high)
    elif shape.free_outline:
        task = _free_outline_task(words, chapters)
    else:
        per = max(1, round(words / chapters))
        task = (
            f"Write the chapter outline of the story as JSON: the book's title, then exactly {chapters} chapters "
            f"with ids 1 to {chapters}, each with a title, a description of 2-4 sentences of what happens, and "
            "target_words. "
            f"The targets must sum to {words} words (about {per} each; vary them if the story needs it)."
        )
    return f"{context}\n{task}"


def _free_outline_task(words: int, chapters: int) -> str:
    """The reference's chapter-outline request in substance (NstAgent ``code/agent/agent_core.py``,
    ``outline_chapters_prompt``): about N chapters, adjustable; each chapter's length is the
    planner's, more for key chapters; the sum within the gate."""
    per = max(1, round(words / chapters))
    return (
        f"Write the chapter outline of the story as JSON: the book's title, then the chapters with ids from 1, "
        f"each with a title, a description of the key events, character moments and plot progression, and "
        f"target_words. Recommended number of chapters: approximately {chapters} (average target ~{per} words "
        "per chapter). You may adjust slightly if the plot requires it, but stay close. The target_words of "
        f"each chapter is up to you; they must sum to within ±20% of {words} words. You may assign more words "
        "to important chapters and fewer to transitional ones."
    )


def make_plan(
    llm: LLM,
    prompt: str,
    words: int,
    *,
    temperature: float,
    max_tokens: int,
    attempts: int,
    on_stage: Callable[[str], None] | None = None,
    gate_low: float = DEFAULT_LOW,
    gate_high: float = DEFAULT_HIGH,
    budget: Budget | None = None,
    chapters: int | None = None,
    shape: Stages | None = None,
) -> dict[str, Any]:
    """Run every stage for ``words`` and return the plan (premise..outline). ``chapters``: the
    count to plan (default the shape's, :meth:`Stages.chapters_for`; more when the context needs shorter chapters)."""
    budget = budget or Budget(None)
    shape = shape or Stages()
    chapters = chapters or shape.chapters_for(words)
    plan: dict[str, Any] = {"words": words, "chapters": chapters, "notes": []}
    previous: str | None = None
    for stage in shape.for_words(words):
        if on_stage:
            on_stage(stage)
        if stage == "outline" and plan.get("premise") and previous != plan["premise"]:
            previous = f"Premise:\n{plan['premise']}\n\n{previous}"
        messages: list[Message] = [
            {"role": "system", "content": SYSTEM},
            {
                "role": "user",
                "content": _stage_prompt(stage, prompt, previous, words, chapters, shape, gate_low, gate_high),
            },
        ]
        if stage != "outline":
            reply = budget.generate(
                llm,
                messages,
                temperature=temperature,
                max_tokens=max_tokens,
                min_output=min(max_tokens, 256),
                role=f"plan_{stage}",
                what=f"the {stage} stage",
            )
            text = reply.text.strip()
            if reply.finish_reason == "length":
                plan["notes"].append(f"{stage} stopped at max_tokens={max_tokens}")
            plan[stage] = text
            previous = f"{previous}\n\n{text}" if previous and stage == "acts" else text
            continue
        if shape.outline_style == "reference":
            plan["title"] = reference.book_title(prompt)
            plan["outline"] = _reference_outline(
                llm, messages, prompt, words, chapters, temperature, max_tokens, attempts, gate_low, gate_high, budget
            )
            continue
        plan["title"], plan["outline"] = _outline(
            llm,
            messages,
            words,
            chapters,
            temperature,
            attempts,
            gate_low,
            gate_high,
            budget,
            free=shape.free_outline,
            max_tokens=max_tokens,
        )
    return plan


def target_choices(words: int, chapters: int, low: float = DEFAULT_LOW, high: float = DEFAULT_HIGH) -> list[int]:
    """The chapter targets the outline grammar allows: round numbers inside the gate around an even share.

    Any n of them sum to inside the gate around ``words``, so the length rule holds by construction
    (a small model cannot add up); the validator still checks it. JSON Schema's integer
    bounds are not enforced by every decoder, a closed enum is.
    """
    per = words / chapters
    lo, hi = target_range(words, chapters, low, high)
    step = next((s for s in (500, 250, 100, 50, 25, 10, 5, 1) if hi - lo >= 4 * s), 1)
    values = list(range(math.ceil(lo / step) * step, hi + 1, step))
    return values or [round(per)]


def target_range(words: int, chapters: int, low: float = DEFAULT_LOW, high: float = DEFAULT_HIGH) -> tuple[int, int]:
    """The words one chapter's target may have: the gate around an even share of the story."""
    return bounds(words / chapters, low, high)


def outline_schema(
    words: int,
    chapters: int,
    low: float = DEFAULT_LOW,
    high: float = DEFAULT_HIGH,
    *,
    targets: Sequence[int] | None = None,
) -> JsonSchema:
    """The ``nst_outline`` grammar narrowed for this story: exactly ``chapters`` chapters, chapter
    ``i`` at position ``i`` (a ``prefixItems`` tuple, so ids cannot come out of order: the tiny model
    wrote ``[2, 1]`` three times running under a plain id enum) and targets from
    :func:`target_choices` (``targets``: chapter ``i`` held to ``targets[i - 1]``, for a re-plan that
    keeps each chapter's target)."""
    schema = Outline.model_json_schema()
    chapter = schema["$defs"].pop("OutlineChapter")
    described = chapter["properties"]
    choices = target_choices(words, chapters, low, high)

    def at(position: int) -> dict[str, Any]:
        item = copy.deepcopy(chapter)
        item["properties"]["id"] = {
            "type": "integer",
            "enum": [position],
            "description": described["id"]["description"],
        }
        item["properties"]["target_words"] = {
            "type": "integer",
            "enum": [targets[position - 1]] if targets is not None else list(choices),
            "description": described["target_words"]["description"],
        }
        return item

    array = schema["properties"]["chapters"]
    array.pop("items", None)
    array.update(prefixItems=[at(i) for i in range(1, chapters + 1)], items=False, minItems=chapters, maxItems=chapters)
    if not schema["$defs"]:
        del schema["$defs"]
    return JsonSchema(schema, "nst_outline")


SHORTER = "\nKeep each description to two short sentences."


def _asking_shorter(messages: list[Message]) -> list[Message]:
    """The same conversation with its last (user) message asking for shorter descriptions, once: a
    cut reply is not kept, so no assistant turn follows it (roles still alternate)."""
    last = messages[-1]
    if last["content"].endswith(SHORTER):
        return messages
    return [*messages[:-1], {"role": "user", "content": last["content"] + SHORTER}]


def _outline(
    llm: LLM,
    messages: list[Message],
    words: int,
    chapters: int,
    temperature: float,
    attempts: int,
    low: float,
    high: float,
    budget: Budget,
    *,
    free: bool = False,
    max_tokens: int | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """The book's title and the validated chapters (``free``: the plain outline grammar, so the
    count and each chapter's target are the planner's; the validator still judges them, and the
    reply gets the planner's ceiling, ``max_tokens``, as every reference stage does)."""
    tokens = max(max_tokens or 0, 160 * chapters + 256) if free else 160 * chapters + 256
    errors: list[str] = []
    grammar = (
        JsonSchema(Outline.model_json_schema(), "nst_outline") if free else outline_schema(words, chapters, low, high)
    )
    for _ in range(max(1, attempts)):
        try:
            reply = budget.generate(
                llm,
                messages,
                grammar,
                temperature=temperature,
                max_tokens=tokens,
                min_output=min(tokens, 60 * chapters + 64),
                role="plan_outline",
                what="the chapter outline",
            )
        except TruncatedOutputError:
            errors.append(f"cut at {tokens} tokens")
            messages = _asking_shorter(messages)
            tokens = int(tokens * 1.5)
            continue
        except OutputValidationError as exc:
            errors.append(str(exc))
            continue
        try:
            parsed = Outline.model_validate(reply.parsed)
            return " ".join(parsed.title.split()), validate_outline(parsed, words, chapters, low, high)
        except ValueError as exc:
            errors.append(str(exc))
            messages = [
                *messages,
                {"role": "assistant", "content": reply.text},
                {
                    "role": "user",
                    "content": f"This outline is invalid: {exc}. Reply with the corrected outline as JSON.",
                },
            ]
    raise PlanError(f"no valid outline after {attempts} attempt(s): " + " | ".join(errors))


def _reference_outline(
    llm: LLM,
    messages: list[Message],
    prompt: str,
    words: int,
    chapters: int,
    temperature: float,
    max_tokens: int,
    attempts: int,
    low: float,
    high: float,
    budget: Budget,
) -> list[dict[str, Any]]:
    """The chapters of the reference's outline as fabula's outline items (``reference.to_fabula``).

    Each attempt is one free reply (no grammar) of up to the planner's ``max_tokens``; a reply that
    did not stop by itself is asked again as it was, one whose JSON cannot be read or is refused is
    kept in the conversation and followed by the error (``reference.reask``), as the reference's
    ``_chat_json`` does, ``attempts`` times in all."""
    errors: list[str] = []
    for _ in range(max(1, attempts)):
        reply = budget.generate(
            llm,
            messages,
            temperature=temperature,
            max_tokens=max_tokens,
            min_output=min(max_tokens, 60 * chapters + 64),
            role="plan_outline",
            what="the chapter outline",
        )
        if reply.finish_reason != "stop":
            errors.append(f"the reply ended with finish_reason {reply.finish_reason!r}, not 'stop'")
            continue
        try:
            return reference.to_fabula(reference.read(reply.text, words, prompt, low, high))
        except ValueError as exc:
            errors.append(str(exc))
            messages = [
                *messages,
                {"role": "assistant", "content": reply.text},
                {"role": "user", "content": reference.reask(str(exc))},
            ]
    raise PlanError(f"no valid outline after {attempts} attempt(s): " + " | ".join(errors))
