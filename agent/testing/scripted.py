"""The one scripted model: replies from a script, every request kept, through the real shared layer.

Why: a test, a benchmark or a simulation drives the real pipelines and the real checks of
:class:`~agent.llm.base.LLM` (parsing, truncation, retries, the ledger) with no model behind them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from agent.llm.base import LLM, Request
from agent.llm.types import LLMError, RawReply, ToolCall, Usage

UsageOf = Callable[[Request, str], Usage]
"""A call's usage as a function of the request and the reply's text."""


def per_word(prompt: int, cached: int = 0) -> UsageOf:
    """Fixed prompt counts and one completion token a word of the reply."""
    return lambda request, text: Usage(prompt, cached, len(text.split()))


WORDS = per_word(10, 4)
"""The default usage: 10 prompt tokens (4 cached) and a completion token a word."""


class ScriptedLLM(LLM):
    """A model whose replies come from ``script``: a list, answered in order (``replies`` holds what is
    left), or a function of the :class:`Request`. Subclasses answer from the request in :meth:`answer`.

    A reply is text, ``(text, finish_reason)``, any other JSON-able object (sent as JSON), a
    :class:`RawReply` (as it is), a :class:`ToolCall` or a list of them (a native tool-call reply:
    no text, finish reason ``tool_calls``) or an :class:`LLMError` (raised). Requests with ``tools``
    and ``tool`` messages are answered like any other (the script decides whether to call). Each
    request is appended to ``requests`` (unless ``keep`` is false) and counted by role in ``counts``
    before it is answered.
    ``usage`` is a fixed :class:`Usage` or a function of the request and the text; ``context`` is
    the context the model states (``None``: it says nothing)."""

    backend = "scripted"

    def __init__(
        self,
        script: Iterable[Any] | Callable[[Request], Any] = (),
        *,
        model: str = "scripted-model",
        usage: Usage | UsageOf = WORDS,
        context: int | None = None,
        keep: bool = True,
    ) -> None:
        super().__init__(model)
        self.script = script if callable(script) else None
        self.replies: list[Any] = [] if callable(script) else list(script)
        self.usage = usage
        self.context = context
        self.keep = keep
        self.requests: list[Request] = []
        self.counts: dict[str, int] = {}

    @property
    def context_length(self) -> int | None:
        return self.context

    def by_role(self, role: str) -> list[Request]:
        """The kept requests of ``role``, in order."""
        return [r for r in self.requests if r.role == role]

    def answer(self, request: Request) -> Any:
        """The reply to ``request``: the script called on it, or the list's next entry."""
        return self.script(request) if self.script is not None else self.replies.pop(0)

    def usage_of(self, request: Request, text: str) -> Usage:
        return self.usage if isinstance(self.usage, Usage) else self.usage(request, text)

    def _complete(self, request: Request) -> RawReply:
        if self.keep:
            self.requests.append(request)
        role = request.role or ""
        self.counts[role] = self.counts.get(role, 0) + 1
        reply = self.answer(request)
        if isinstance(reply, LLMError):
            raise reply
        if isinstance(reply, RawReply):
            return reply
        calls = [reply] if isinstance(reply, ToolCall) else reply
        if isinstance(calls, list) and calls and all(isinstance(c, ToolCall) for c in calls):
            return RawReply("", "tool_calls", self.usage_of(request, ""), self.model, tool_calls=tuple(calls))
        text, finish = (
            reply if isinstance(reply, tuple) else (reply if isinstance(reply, str) else json.dumps(reply), "stop")
        )
        return RawReply(text=text, finish_reason=finish, usage=self.usage_of(request, text), model=self.model)
