"""Knowing the model's context: how long it is, and how many tokens a request takes.

A pipeline that budgets its prompts needs two facts it cannot guess: the context length and a
token count of every request. Both depend on the backend, so they live here, beside it:

- the **context length** comes from the user's ``--context-tokens`` (the run's setting) when
  given, else from the server (``max_model_len`` in ``GET /v1/models``, as vLLM and SGLang
  report it), else from the embedded model's config (``max_position_embeddings``); else it is
  unknown and nothing is budgeted (a scripted test model);
- a **token count** comes from the model's own tokenizer in process (embedded), from the
  server's ``/tokenize`` (vLLM), or from a conservative characters-based estimate that the run
  records as such, so nobody mistakes it for a measurement.

Every counter counts a chat request as the model sees it (the chat template included), since
that is what a server compares with its context.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agent.llm.tool_text import chat_messages
from agent.llm.types import Message, ToolSpec

CHARS_PER_TOKEN = 3.0
"""Latin text averages about 4 characters a token on current vocabularies; 3 over-counts."""
CJK_TOKENS_PER_CHAR = 1.5
TOKENIZE_BUDGET_S = 30.0
"""The most one ``/tokenize`` call may take (less when the run's call timeout is shorter)."""
TOKENIZE_MAX_BYTES = 2**22
MESSAGE_OVERHEAD = 8
"""Template tokens per chat message (role markers, separators) for the estimate."""


class TokenCounter(Protocol):
    """Counts the prompt tokens of a chat request. ``exact``: from the model's tokenizer."""

    name: str
    exact: bool

    def count(self, messages: Sequence[Message]) -> int: ...


@dataclass
class CharsEstimate:
    """A conservative estimate when no tokenizer is at hand: over-counts, never under-counts
    on ordinary text (CJK characters are counted at 1.5 tokens each)."""

    name: str = "chars-estimate"
    exact: bool = False
    chars_per_token: float = CHARS_PER_TOKEN

    def count_text(self, text: str) -> int:
        cjk = sum(
            1 for ch in text if "\u2e80" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af" or "\uf900" <= ch <= "\ufaff"
        )
        return math.ceil((len(text) - cjk) / self.chars_per_token + cjk * CJK_TOKENS_PER_CHAR)

    def count(self, messages: Sequence[Message]) -> int:
        return sum(self.count_text(m.get("content", "")) + MESSAGE_OVERHEAD for m in messages) + MESSAGE_OVERHEAD


def count_key(messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> tuple[Any, ...]:
    """What a count depends on, as a dict key: each message's role and content, and under the native
    tool protocol its tool calls and the call it answers, and the tools offered (two conversations
    that differ only in a call's arguments must not share a count)."""
    key = tuple(
        (m.get("role", ""), m.get("content", ""))
        if "tool_calls" not in m and "tool_call_id" not in m
        else (m.get("role", ""), m.get("content", ""), json.dumps(m.get("tool_calls")), m.get("tool_call_id"))
        for m in messages
    )
    return (*key, json.dumps(list(tools), sort_keys=True)) if tools else key


class TemplateCounter:
    """The model's own tokenizer and chat template, in process (the embedded backend; any tokenizer
    with ``apply_chat_template``). A pipeline counts the same conversation several times while it
    decides what fits, so the last counts are kept. A conversation under the native tool protocol is
    counted as the embedded engines send it (:func:`agent.llm.tool_text.chat_messages`), with the
    tools offered when ``tools`` is given."""

    exact = True

    def __init__(self, tokenizer: Any, name: str = "tokenizer", cache: int = 512) -> None:
        self.tokenizer = tokenizer
        self.name = name
        self._cache: dict[tuple[Any, ...], int] = {}
        self._size = cache

    def count(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> int:
        key = count_key(messages, tools)
        found = self._cache.get(key)
        if found is not None:
            return found
        ids = self.tokenizer.apply_chat_template(
            chat_messages(messages, tools), add_generation_prompt=True, tokenize=True
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        if len(self._cache) >= self._size:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = len(ids)
        return len(ids)


class ServerCounter:
    """vLLM's ``POST /tokenize`` (at the server root, beside ``/v1``): the server's own count,
    through a bounded client (a time budget and a size cap: a hostile server cannot hang a run)."""

    exact = True
    name = "server /tokenize"

    def __init__(self, client: Any, model: str, template_kwargs: dict[str, Any] | None = None) -> None:
        self._client = client
        self.model = model
        self.template_kwargs = template_kwargs or {}
        """The ``chat_template_kwargs`` every chat request sends (the thinking switch): the count must
        render the template as the request does, or a Qwen3 hybrid is undercounted."""

    def count(self, messages: Sequence[Message]) -> int:
        body: dict[str, Any] = {"model": self.model, "messages": list(messages), "add_generation_prompt": True}
        if self.template_kwargs:
            body["chat_template_kwargs"] = self.template_kwargs
        data = self._client.request_json("POST", "/tokenize", body=body, retry=False)
        if not isinstance(data, dict):
            raise ValueError("/tokenize did not answer with an object")
        return int(data["count"]) if "count" in data else len(data["tokens"])

    def close(self) -> None:
        self._client.close()


@dataclass(frozen=True)
class ContextInfo:
    """The context a run budgets against: its length (None: unknown) and where it came from."""

    tokens: int | None
    source: str
    counter: str
    exact: bool

    def facts(self) -> dict[str, Any]:
        """What the run records about its context (the plan's ``context`` entry)."""
        return {
            "context_tokens": self.tokens,
            "source": self.source,
            "counter": self.counter,
            "exact_counts": self.exact,
        }


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def server_context(llm: Any) -> int | None:
    """The served model's context, as the backend states it (``LLM.context_length``: what the
    endpoint's probe found: vLLM's ``max_model_len``, llama-server's ``n_ctx``, TGI's
    ``max_total_tokens``, the ``num_ctx`` fabula asks Ollama for)."""
    return _positive(getattr(llm, "context_length", None))


def embedded_context(llm: Any) -> int | None:
    """The model's own configured context (``LLM.model_context``: the embedded model's
    ``max_position_embeddings``)."""
    return _positive(getattr(llm, "model_context", None))


def counter_for(llm: Any) -> TokenCounter:
    """The best counter for ``llm``: what the backend offers (``LLM.token_counter``: its tokenizer
    in process, its server's ``/tokenize``), else the estimate."""
    offer = getattr(llm, "token_counter", None)
    counter = offer() if callable(offer) else None
    return counter if counter is not None else CharsEstimate()


def resolve_context(llm: Any, configured: int | None) -> tuple[ContextInfo, TokenCounter]:
    """The run's context and counter: the setting first, then the server, then the embedded config."""
    counter = counter_for(llm)
    if configured:
        tokens, source = int(configured), "setting context_tokens"
    elif (served := server_context(llm)) is not None:
        tokens, source = served, "server max_model_len"
    elif (own := embedded_context(llm)) is not None:
        tokens, source = own, "embedded model config"
    else:
        tokens, source = None, "unknown (not budgeted)"
    return ContextInfo(tokens, source, counter.name, counter.exact), counter


def is_length_rejection(error: BaseException) -> bool:
    """Whether a server refused a request for its length (context, max_tokens, min_tokens)."""
    text = str(error).lower()
    return ("http 400" in text or "http 413" in text) and any(
        word in text
        for word in ("context length", "maximum context", "max_tokens", "min_tokens", "too long", "max_model_len")
    )
