"""One context budget for every pipeline: each request fits the model's context before it is sent.

Every pipeline's prompts go through the same object, so there is one rule for what a request may
ask and one record of what gave way (history: docs/design/budget.md). A :class:`Budget` holds
the run's context (``agent.llm.context``) and its token counter:

- :meth:`Budget.fit` counts a prompt, lets the caller shrink it (``shrink``: each call frees
  one thing and names it) while even the smallest useful reply (``min_output``) would not fit,
  and returns the ``max_tokens`` left of the context minus a reserve;
- :meth:`Budget.generate` is ``llm.generate`` through :meth:`fit`; a server that still refuses
  a request for its length widens the reserve and the request is sent again, so the run is
  never aborted by a clamp the server applied on its own;
- when nothing more can give way the run stops with :class:`ContextExceededError`, one line
  naming the context and what did not fit.

Every step that gives way is handed to ``record`` (the pipelines: a ``budget`` row in the run's
tool ledger, ``arguments.action``), which ``fabula show`` counts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.llm.base import LLM
from agent.llm.context import CharsEstimate, ContextInfo, TokenCounter, is_length_rejection, resolve_context
from agent.llm.types import Completion, LLMError, Message, ToolSpec

Shrink = Callable[[], str | None]
"""Frees room in the caller's conversation; returns what it did, or None when nothing is left."""
Recorder = Callable[[str, dict[str, Any]], None]

SERVER_RETRIES = 3


class ContextExceededError(LLMError):
    """A request that cannot fit the model's context even after everything gave way.

    The run stops with this one line (and stays resumable): raise the context
    (``--set context_tokens=N`` or the server's ``--max-model-len``) and ``fabula resume``."""


@dataclass
class Budget:
    """The run's context, counter and reserve; ``context`` None means unknown: nothing is clamped."""

    context: int | None
    counter: TokenCounter = field(default_factory=CharsEstimate)
    reserve: int = 64
    record: Recorder | None = None
    slack: int = 0
    """Extra reserve learnt from server rejections (a counter that under-counts)."""
    info: ContextInfo | None = None
    clamped: bool = False
    """Whether the last request's ``max_tokens`` was cut to fit the context: a reply cut off at
    that limit then says the context is full, not that the model rambled."""

    @property
    def limit(self) -> int | None:
        """The most prompt + max_tokens a request may ask for."""
        return None if self.context is None else self.context - self.reserve - self.slack

    def count(self, messages: Sequence[Message]) -> int:
        return self.counter.count(messages)

    def room(self, messages: Sequence[Message]) -> int | None:
        """Output tokens left after ``messages`` (None: unbounded)."""
        limit = self.limit
        return None if limit is None else limit - self.count(messages)

    def note(self, action: str, **facts: Any) -> None:
        """Record one step that gave way (ledger ``budget`` call)."""
        if self.record is not None:
            self.record(action, facts)

    def fail(self, what: str, prompt: int, needed: int) -> ContextExceededError:
        return ContextExceededError(
            f"the context of {self.context} tokens is too small: {what} needs {prompt} prompt tokens + {needed} "
            f"output tokens (reserve {self.reserve + self.slack}); raise it (--set context_tokens=N or the "
            "server's --max-model-len) and fabula resume the run"
        )

    def fit(
        self,
        messages: Callable[[], Sequence[Message]],
        *,
        max_tokens: int,
        min_output: int,
        what: str,
        shrink: Shrink | None = None,
    ) -> int:
        """The ``max_tokens`` the conversation ``messages()`` may ask for: the prompt is shrunk
        (``shrink``, each step recorded) until ``min_output`` fits, then ``max_tokens`` is clamped
        to the room left (recorded). ``messages`` is called again after every shrink."""
        min_output = min(min_output, max_tokens)
        self.clamped = False
        if self.limit is None:
            return max_tokens
        prompt = self.count(messages())
        while self.limit - prompt < min_output:
            done = shrink() if shrink is not None else None
            if done is None:
                raise self.fail(what, prompt, min_output)
            self.note(done, what=what, prompt_tokens=prompt)
            prompt = self.count(messages())
        asked = min(max_tokens, self.limit - prompt)
        if asked < max_tokens:
            self.note("clamp_max_tokens", what=what, prompt_tokens=prompt, wanted=max_tokens, given=asked)
        self.clamped = asked < max_tokens
        return asked

    def refused(self, error: BaseException, what: str) -> bool:
        """After a failed request: True (reserve widened, recorded) when a server refused it for its
        length and the request should be fitted and sent again."""
        if self.context is None or not is_length_rejection(error):
            return False
        self.slack += max(64, self.context // 20)
        self.note("server_refused_length", what=what, error=str(error)[:300], slack=self.slack)
        return True

    def generate(
        self,
        llm: LLM,
        messages: list[Message],
        output_type: Any = None,
        *,
        temperature: float,
        max_tokens: int,
        min_output: int,
        what: str,
        min_tokens: int | None = None,
        role: str | None = None,
        shrink: Shrink | None = None,
        tools: list[ToolSpec] | None = None,
        ask_again_if_looped: bool = True,
    ) -> Completion:
        """``llm.generate`` with ``max_tokens`` fitted to the context; see the module doc. Native ``tools``
        are counted as part of the system message (where chat templates put them)."""
        for _ in range(SERVER_RETRIES + 1):
            asked = self.fit(
                lambda: with_tools(messages, tools),
                max_tokens=max_tokens,
                min_output=min_output,
                what=what,
                shrink=shrink,
            )
            floor = None if min_tokens is None else max(0, min(min_tokens, asked - 1))
            try:
                return llm.generate(
                    list(messages),
                    output_type,
                    temperature=temperature,
                    max_tokens=asked,
                    min_tokens=floor or None,
                    role=role,
                    tools=tools,
                    ask_again_if_looped=ask_again_if_looped,
                )
            except LLMError as exc:
                if not self.refused(exc, what):
                    raise
        raise self.fail(what, self.count(with_tools(messages, tools)), min(min_output, max_tokens))


def with_tools(messages: list[Message], tools: list[ToolSpec] | None) -> list[Message]:
    """``messages`` as counted with native ``tools``: their specs joined to the system message."""
    if not tools or not messages or messages[0].get("role") != "system":
        return messages
    specs = json.dumps(tools, ensure_ascii=False)
    return [{**messages[0], "content": f"{messages[0]['content']}\n\n{specs}"}, *messages[1:]]


def open_budget(
    llm: LLM,
    context_tokens: int | None,
    *,
    reserve: int,
    record: Recorder | None = None,
    put_facts: Callable[[dict[str, Any]], None] | None = None,
) -> Budget:
    """The run's budget: context and counter resolved from the model (``agent.llm.context``), the
    facts recorded with ``put_facts`` (the run's plan table: ``show`` reads them)."""
    info, counter = resolve_context(llm, context_tokens)
    if put_facts is not None:
        put_facts({**info.facts(), "reserve": reserve})
    return Budget(info.tokens, counter, reserve, record, info=info)


def ledger_recorder(store: Any) -> Recorder:
    """Budget actions as ``budget`` rows of a run's tool ledger (``store``: a ``RunStore``),
    attributed to the unit in flight."""

    def record(action: str, facts: dict[str, Any]) -> None:
        store.ledger.record_tool_call(
            turn=0, tool="budget", arguments={"action": action, **facts}, result=None, ok=True
        )

    return record


def run_budget(ctx: Any, context_tokens: int | None, reserve: int) -> Budget:
    """The budget of a run (``ctx``: a ``RunContext``): context from the setting, server or model;
    facts in the plan table (``context``); actions in the ledger."""
    return open_budget(
        ctx.llm,
        context_tokens,
        reserve=reserve,
        record=ledger_recorder(ctx.store),
        put_facts=lambda facts: ctx.store.plans.put("context", facts),
    )
