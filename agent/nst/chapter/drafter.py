"""Drafting prose against the length gate, shared by NstAgent's write tool, RollSum and Direct.

:class:`Drafter` makes one attempt: it sizes ``max_tokens``/``min_tokens`` from the gate and the
measured tokens-per-word ratio, generates plain prose, strips a heading line, counts words,
learns the ratio from the reply (cut-off replies included) and judges the draft.
:func:`draft_until_gate` is the baselines' loop around it: bounded attempts, each retry seeing
only the latest rejected draft and its feedback, the closest draft kept (and the unit marked
degraded) when none passes. NstAgent's chapter loop calls :meth:`Drafter.attempt` once per
``write`` tool call instead, since there the model decides what to do after a rejection.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from agent.gate import Gate
from agent.llm import LLM
from agent.llm.budget import Budget, Shrink
from agent.llm.types import Completion, Message
from agent.nst.chapter.sizing import grown_budget, mostly_cjk, reference_budget, size_tokens, update_ratio
from agent.repetition import Repetition, measure
from agent.run_context import RunContext
from agent.text import count_words, sentence_spans

_HEADING = re.compile(r"^\s*(#+\s.*|\**\s*chapter\s+\d+\b.*)$", re.IGNORECASE)


def clean_prose(text: str) -> str:
    """The prose of a reply: a leading heading line ("Chapter 3: ...", "# ...") removed."""
    lines = text.strip().splitlines()
    if lines and _HEADING.match(lines[0]) and count_words(lines[0]) <= 15:
        lines = lines[1:]
    return "\n".join(lines).strip()


@dataclass(frozen=True)
class Attempt:
    """One draft and the verdict on it: the gate's, and the repetition guard's."""

    text: str
    words: int
    truncated: bool
    accepted: bool
    max_tokens: int
    min_tokens: int | None
    reply: Completion
    repeated: Repetition | None = None
    """Set when the guard rejected the draft for repeating itself."""
    trimmed: bool = False
    """A draft cut at max_tokens, cut back to its last complete sentence (and then inside the gate)."""
    unended: bool = False
    """Rejected for ending mid-sentence, without terminal punctuation (``terminal_punctuation``)."""

    def facts(self) -> dict[str, Any]:
        """What the ledger records about the attempt."""
        facts: dict[str, Any] = {
            "words": self.words,
            "truncated": self.truncated,
            "accepted": self.accepted,
            "max_tokens": self.max_tokens,
            "min_tokens": self.min_tokens,
        }
        if self.trimmed:
            facts["trimmed"] = True
        if self.unended:
            facts["unended"] = True
        if self.repeated is not None:
            facts["repetition"] = {"rate": round(self.repeated.rate, 3), "span_words": self.repeated.span_words}
        return facts

    def feedback(self, gate: Gate) -> str:
        """What the model is told about a rejected draft."""
        if self.repeated is not None:
            return self.repeated.feedback()
        if self.unended and gate.accepts(self.words, self.truncated):
            return f"REJECTED: {self.words} words, inside the range ({gate.describe()}), but {UNENDED}"
        return gate.feedback(self.words, self.truncated)


@dataclass(frozen=True)
class Guard:
    """The repetition guard's thresholds (``agent.repetition``)."""

    max_rate: float
    max_span: int

    @classmethod
    def of(cls, config: Any) -> Guard | None:
        """The guard a pipeline's settings ask for (``None`` when switched off)."""
        if not getattr(config, "repetition_guard", False):
            return None
        return cls(config.repetition_max_rate, config.repetition_max_span)

    def check(self, text: str) -> Repetition | None:
        found = measure(text)
        return found if found.exceeds(self.max_rate, self.max_span) else None


class Drafter:
    """Writes drafts for one gate; ``ratio`` (tokens per word) improves with every reply."""

    def __init__(
        self,
        llm: LLM,
        gate: Gate,
        ratio: float,
        *,
        temperature: float,
        cap: int,
        use_min: bool,
        role: str,
        guard: Guard | None = None,
        trim: bool = False,
        budget: Budget | None = None,
        shrink: Shrink | None = None,
        fixed: int | None = None,
    ) -> None:
        self.llm, self.gate, self.ratio = llm, gate, ratio
        self.fixed = fixed
        """A fixed prose ceiling (the paper's ``prose_max_tokens``) instead of one sized from the gate."""
        self.require_ending = False
        """Reject a draft that does not end on terminal punctuation (the reference's write check)."""
        self.grow_to: int | None = None
        """Grow ``fixed`` up to this after a draft cut short of the range's top (the reference's RollSum)."""
        self.temperature, self.cap, self.use_min, self.role = temperature, cap, use_min, role
        self.guard, self.trim = guard, trim
        self.budget = budget or Budget(None)
        self.shrink = shrink

    @classmethod
    def for_config(
        cls,
        llm: LLM,
        gate: Gate,
        ratio: float,
        config: Any,
        role: str,
        *,
        budget: Budget | None = None,
        shrink: Shrink | None = None,
    ) -> Drafter:
        """A drafter with a pipeline's settings (temperature, cap, floor, guard, trimming) and the
        context budget its requests must fit."""
        return cls(
            llm,
            gate,
            ratio,
            temperature=config.temperature,
            cap=config.prose_max_tokens_cap,
            use_min=config.min_tokens,
            role=role,
            guard=Guard.of(config),
            trim=getattr(config, "trim_cut_drafts", False),
            budget=budget,
            shrink=shrink,
            fixed=prose_budget(config, gate),
        ).ending_required(getattr(config, "terminal_punctuation", False))

    def ending_required(self, required: bool) -> Drafter:
        self.require_ending = required
        return self

    def min_output(self) -> int:
        """The least room a draft needs: the top of the range at the measured ratio. Less than
        that and a complete draft cannot fit, so the conversation shrinks (or the run stops)
        instead of sending a request whose draft would be cut at the context edge."""
        return math.ceil(self.gate.high * self.ratio) + 16

    def attempt(self, messages: list[Message]) -> Attempt:
        """One draft, its ``max_tokens`` fitted to the context (``messages`` may shrink in place)."""
        max_tokens, min_tokens = size_tokens(self.gate, self.ratio, cap=self.cap, use_min=self.use_min, trim=self.trim)
        if self.fixed is not None:
            max_tokens = self.fixed
        reply = self.budget.generate(
            self.llm,
            messages,
            temperature=self.temperature,
            max_tokens=max_tokens,
            min_output=self.min_output(),
            min_tokens=min_tokens,
            role=self.role,
            what=f"a draft of {self.gate.describe()}",
            shrink=self.shrink,
        )
        text = clean_prose(reply.text)
        words, truncated = count_words(text), reply.finish_reason == "length"
        if self.grow_to is not None and truncated and words <= self.gate.high and self.fixed is not None:
            self.fixed = grown_budget(self.fixed, self.grow_to)
        self.ratio = update_ratio(self.ratio, reply)
        return self.judge(text, reply, max_tokens, min_tokens, truncated=truncated)

    def judge(
        self, text: str, reply: Completion, max_tokens: int, min_tokens: int | None, *, truncated: bool
    ) -> Attempt:
        """The verdict on a draft's ``text`` (the gate, the repetition guard, the ending check): for a
        reply of its own (:meth:`attempt`), or for the prose a native ``write`` call carried."""
        words = count_words(text)
        trimmed = False
        if truncated and self.trim:
            cut = whole_sentences(text, max_words=self.gate.high)
            if cut and self.gate.accepts(count_words(cut)):
                text, words, truncated, trimmed = cut, count_words(cut), False, True
        repeated = self.guard.check(text) if self.guard is not None else None
        unended = self.require_ending and not ends_a_sentence(text)
        accepted = self.gate.accepts(words, truncated) and repeated is None and not unended
        return Attempt(text, words, truncated, accepted, max_tokens, min_tokens, reply, repeated, trimmed, unended)


SENTENCE_ENDS = (".", "!", "?", '"', "”", "’", "'", "。", "！", "？")
"""How a complete sentence ends (a closing quote after the punctuation counts)."""
TERMINAL = ".!?…。！？"
CLOSERS = "\"'”’)]}*_"
UNENDED = "the chapter stops mid-sentence: end it on a complete sentence."
"""Why a draft in the range that ends without terminal punctuation is rejected."""


def ends_a_sentence(text: str) -> bool:
    """``text`` ends on terminal punctuation, closing quotes, brackets and emphasis marks aside (the
    NstAgent reference's write check: a chapter cut mid-sentence is never accepted)."""
    ending = text.rstrip()
    while ending and ending[-1] in CLOSERS:
        ending = ending[:-1].rstrip()
    return bool(ending) and ending[-1] in TERMINAL


def whole_sentences(text: str, max_words: int | None = None) -> str:
    """``text`` up to its last complete sentence, or, with ``max_words``, up to the last sentence
    end that keeps it within that many words (empty for a text of fewer than two sentences, or
    when no complete sentence fits).

    A draft cut at its token limit has run past the gate's top (``max_tokens`` is sized above
    it), so cutting only the unfinished sentence would leave it too long: the story up to an
    earlier sentence is what may lie inside the range."""
    spans = sentence_spans(text)
    if len(spans) < 2:
        return ""
    if not text[spans[-1][0] : spans[-1][1]].rstrip().endswith(SENTENCE_ENDS):
        spans = spans[:-1]
    if max_words is not None:
        total, keep = 0, 0
        for start, end in spans:
            total += count_words(text[start:end])
            if total > max_words:
                break
            keep += 1
        spans = spans[:keep]
    return text[: spans[-1][1]].rstrip() if spans else ""


def prose_budget(config: Any, gate: Gate) -> int | None:
    """A pipeline's fixed prose budget: the reference's dynamic one (``turn_token_overhead``) under the
    ``prose_max_tokens`` ceiling, else ``prose_max_tokens``; None: sized from the gate per draft."""
    fixed: int | None = getattr(config, "prose_max_tokens", None)
    overhead: int | None = getattr(config, "turn_token_overhead", None)
    if overhead is None:
        return fixed
    ceiling = fixed or config.prose_max_tokens_cap
    return reference_budget(gate.target, overhead, ceiling, cjk=mostly_cjk(config.prompt))


@dataclass(frozen=True)
class GateOutcome:
    """The draft a unit keeps: accepted, or the closest one (degraded) after every attempt failed."""

    text: str
    words: int
    degraded: bool
    reason: str | None
    attempts: int
    first_attempt_pass: bool


def draft_until_gate(drafter: Drafter, base: list[Message], attempts: int, *, on_attempt: Any = None) -> GateOutcome:
    """Draft up to ``attempts`` times; ``on_attempt(number, attempt, feedback)`` sees each one."""
    gate = drafter.gate
    messages = base
    best: tuple[tuple[bool, int], Attempt] | None = None
    first: bool | None = None
    for number in range(1, attempts + 1):
        attempt = drafter.attempt(messages)
        first = attempt.accepted if first is None else first
        feedback = None if attempt.accepted else attempt.feedback(gate)
        if on_attempt is not None:
            on_attempt(number, attempt, feedback)
        if attempt.accepted:
            return GateOutcome(attempt.text, attempt.words, False, None, number, bool(first))
        rank = (attempt.truncated, gate.distance(attempt.words))
        if best is None or rank < best[0]:
            best = (rank, attempt)
        assert feedback is not None  # a rejected draft has its feedback
        # the retry sees only the latest rejected draft and its feedback (bounded context)
        messages = [*base, {"role": "assistant", "content": attempt.text}, {"role": "user", "content": feedback}]
    assert best is not None
    kept = best[1]
    reason = (
        f"no draft passed the length gate in {attempts} attempts; kept the closest: {kept.words} words "
        f"for {gate.low}-{gate.high}"
    )
    return GateOutcome(kept.text, kept.words, True, reason, attempts, bool(first))


def record_attempt(ctx: RunContext[Any]):
    """The ledger and progress entry of one baseline draft (the same shape for RollSum and Direct)."""

    def record(number: int, attempt: Attempt, feedback: str | None) -> None:
        ctx.store.ledger.record_tool_call(
            turn=number, tool="write", arguments=attempt.facts(), ok=attempt.accepted, result=feedback
        )
        ctx.emit("draft", attempts=number, words=attempt.words, accepted=attempt.accepted)

    return record
