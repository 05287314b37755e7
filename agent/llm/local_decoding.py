"""What the two in-process engines of the embedded backend share (``agent.llm.embedded``:
transformers; ``agent.llm.embedded_llamacpp``: llama.cpp on a GGUF).

Written once so both enforce the same things: the same regex for a constraint (numeric bounds
spliced in, compact JSON), compiled once per schema into an Outlines index; the refusal of
``min_tokens`` beside a schema; the runaway check for structured replies; and how a reply's
text and finish reason are read from the generated token ids.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from agent.llm import heartbeat
from agent.llm.bounds import JSON_WHITESPACE, decoding_regex
from agent.llm.constraints import Constraint
from agent.llm.types import UnsupportedSettingError
from agent.repetition import loop_tail, ran_away
from agent.text import close_point, count_words

RUNAWAY_EVERY = 32
"""Tokens between two runaway checks of a structured reply."""
RUNAWAY_WINDOW = 192
"""Tokens of the reply's tail each runaway check reads."""


def constraint_regex(constraint: Constraint) -> str:
    """The regex a constraint decodes under (Outlines ignores minimum/maximum: numeric ranges are
    spliced in as regexes by :func:`agent.llm.bounds.decoding_regex`)."""
    if constraint.kind == "json":
        from outlines_core.json_schema import build_regex_from_schema

        return decoding_regex(constraint.json_schema or {}, build_regex_from_schema, JSON_WHITESPACE)
    if constraint.kind == "regex":
        return constraint.pattern or ""
    return "|".join(re.escape(option) for option in constraint.options or ())


class ConstraintIndexes:
    """Outlines indexes over one vocabulary, compiled once per schema for the life of the process
    (compiling is the costly part of constrained decoding). ``vocabulary`` builds the Outlines
    vocabulary on first use."""

    def __init__(self, vocabulary: Callable[[], Any]) -> None:
        self._make_vocabulary = vocabulary
        self._vocabulary: Any = None
        self._indexes: dict[str, Any] = {}

    def vocabulary(self) -> Any:
        if self._vocabulary is None:
            self._vocabulary = self._make_vocabulary()
        return self._vocabulary

    def index(self, constraint: Constraint) -> Any:
        found = self._indexes.get(constraint.cache_key)
        if found is None:
            from outlines_core import Index

            found = Index(constraint_regex(constraint), self.vocabulary())
            self._indexes[constraint.cache_key] = found
        return found


def hf_vocabulary(tokenizer: Any) -> Any:
    """The Outlines vocabulary of a transformers tokenizer (the embedded model's own)."""
    from outlines.backends.outlines_core import OutlinesCoreBackend
    from outlines.models.transformers import TransformerTokenizer

    tok = TransformerTokenizer(tokenizer)
    return OutlinesCoreBackend.create_outlines_core_vocabulary(
        tok.vocabulary, tok.eos_token_id, tok.eos_token, tok.convert_token_to_string
    )


def refuse_min_tokens_with_schema(min_tokens: int | None, constraint: Constraint | None) -> None:
    """A floor on length beside a grammar could force tokens the grammar forbids: refused loudly."""
    if min_tokens and constraint is not None:
        raise UnsupportedSettingError("embedded backend: min_tokens cannot be combined with a structured output type")


def template_kwargs(thinking: str) -> dict[str, Any]:
    """Chat-template arguments for the thinking mode (``auto``: the template's own default)."""
    return {} if thinking == "auto" else {"enable_thinking": thinking == "on"}


class RunawayCheck:
    """For structured replies: every :data:`RUNAWAY_EVERY` new tokens, whether the reply's tail ran
    away (:func:`agent.repetition.ran_away`). The grammar keeps a string field open as long as the
    model wants; the tiny model once filled a 4,096-token update with word salad (386 s) before it
    was cut. Stopped, the reply counts as cut at its limit and looped, so the LLM layer asks once
    more with a firmer penalty, minutes earlier. A field that quotes an earlier one (an update's
    evidence) is not read as a loop (:func:`agent.repetition.loop_tail`)."""

    def __init__(
        self, decode: Callable[[list[int]], str], *, every: int = RUNAWAY_EVERY, window: int = RUNAWAY_WINDOW
    ) -> None:
        self.decode, self.every, self.window = decode, every, window
        self.stopped = False

    def __call__(self, new_ids: Sequence[int]) -> bool:
        """``new_ids``: the reply's tokens so far. True once it ran away (and from then on)."""
        count = len(new_ids)
        heartbeat.note_tokens(count)
        if count > 0 and count % self.every == 0 and not self.stopped:
            tail = self.decode(list(new_ids[-self.window :]))
            self.stopped = ran_away(tail, loop_tail(self.decode(list(new_ids)), tail))
        return self.stopped


class SentenceClose:
    """For prose asked to close after some words (``Sampling.close_after_words``): after each token,
    whether the reply so far has its close point (:func:`agent.text.close_point`), where
    :func:`read_reply` then cuts it. The 135M model never ends a closing paragraph itself: it wrote
    every demo story's to its ceiling, 35 % past the words asked for."""

    def __init__(self, words: int, decode: Callable[[list[int]], str]) -> None:
        self.words, self.decode = words, decode

    def __call__(self, new_ids: Sequence[int]) -> bool:
        """``new_ids``: the reply's tokens so far. True once it holds its close point."""
        text = self.decode(list(new_ids))
        return count_words(text) > self.words and close_point(text, self.words) is not None


def read_reply(
    text: str,
    new_ids: Sequence[int],
    *,
    eos_ids: set[int],
    max_tokens: int,
    stop: Sequence[str] | None,
    runaway_stopped: bool,
    close_after_words: int | None = None,
) -> tuple[str, str]:
    """The reply's text (cut at the first stop string, or at its close point under
    ``close_after_words``) and its finish reason, OpenAI's way: ``stop`` at an end-of-sequence
    token, a stop string, a close point or an early end; ``length`` at ``max_tokens`` or a runaway
    (cut short, as if at its limit: the layer above retries it once). ``text`` is the decoded reply
    without its end-of-sequence token."""
    finished = bool(new_ids) and new_ids[-1] in eos_ids
    finish_reason = "stop" if finished else "length"
    if stop:
        cut = min((text.find(s) for s in stop if s in text), default=-1)
        if cut >= 0:
            text, finish_reason = text[:cut], "stop"
    if close_after_words is not None and (end := close_point(text, close_after_words)) is not None:
        text, finish_reason = text[:end], "stop"
    if not finished and len(new_ids) < max_tokens:
        finish_reason = "stop"
    if runaway_stopped:
        finish_reason = "length"
    return text, finish_reason
