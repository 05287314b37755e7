"""Sampling controls in the one call shape: penalties and truncation, mapped per backend.

A small model left to plain temperature sampling loops ("The gala was about to begin..."
eighteen times); repetition, frequency and presence penalties, top-p/top-k/min-p and (on the
embedded backend) ``no_repeat_ngram_size`` are what keep it writing. Each backend maps these
to what it has (``agent.llm.endpoint``: the OpenAI fields plus vLLM's extra sampling
parameters; ``agent.llm.embedded``: transformers' generate arguments and a logits processor),
and refuses in one line what it cannot honour. The values used are recorded with every call.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field


class Sampling(BaseModel):
    """Optional sampling controls; ``None`` leaves the backend's default."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    repetition_penalty: float | None = Field(None, ge=1.0, le=2.0)
    """Multiplicative penalty on every token already in the prompt or reply (1.0: off)."""
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    """Subtracted from a token's logit once per earlier occurrence in the reply (OpenAI semantics)."""
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    """Subtracted once from the logit of any token already in the reply."""
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=1, le=1000)
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    no_repeat_ngram_size: int | None = Field(None, ge=2, le=20)
    """Never repeat an n-gram of this size (embedded backend only)."""
    max_string_chars: int | None = Field(None, ge=16, le=100_000)
    """Structured (JSON) replies: a string is closed once it holds this many characters, at decode
    time (``agent.llm.string_cap``); in-process engines only, a server is sent the request without it."""
    max_string_chars_by_key: dict[str, Annotated[int, Field(ge=16, le=100_000)] | None] | None = None
    """... and a string that is the value under one of these object keys (or an item of the array
    under it) at that key's limit instead (``None``: no limit), so a short field (a search query, a
    world-state value) closes sooner than a long one (a quote to replace), and prose in a JSON reply
    not at all."""
    close_after_words: int | None = Field(None, ge=1)
    """Prose: once the reply holds this many words it ends at its next sentence end
    (:func:`agent.text.close_point`, seen when the next sentence begins, which is cut off), even
    before ``min_tokens``, a floor that only estimates the words in tokens. In-process engines only
    (like the string caps): a server writes on to ``max_tokens``, as it did without it."""

    def given(self) -> dict[str, Any]:
        """The controls that are set, as the ledger records them."""
        return {k: v for k, v in self.model_dump().items() if v is not None}

    def stronger(self) -> Sampling:
        """For one retry of a reply that looped: a firmer repetition penalty."""
        current = self.repetition_penalty or 1.0
        return self.model_copy(update={"repetition_penalty": round(min(2.0, max(1.15, current * 1.15)), 3)})


NONE = Sampling()
