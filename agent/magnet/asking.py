"""Asking a role's model: many requests at once, each re-asked when it fails, refitted to the context.

A call is bounded: a failed request (truncated or invalid reply, server error) is re-asked at most
``retries`` times, together with the others that failed; a refused credential stops the run at once.
Shared by every Magnet role so that each one's failures are bounded the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agent.llm import LLM, Completion, LLMError, Request
from agent.llm.budget import Budget
from agent.llm.context import is_length_rejection
from agent.llm.types import AuthenticationError


def ask_many(
    llm: LLM, requests: Sequence[Request], retries: int, budget: Budget | None = None
) -> list[Completion | LLMError]:
    """Run requests concurrently; re-ask the failed ones (together) up to ``retries`` times.

    With ``budget``: a request the server refused for its length (our count of its prompt was
    short) widens the budget's reserve, as NstAgent's calls do, and is fitted again before it is
    re-asked, so the retry is not the same refused request; later requests are fitted under the
    wider reserve too."""
    requests = list(requests)
    results: list[Completion | LLMError] = list(llm.generate_many(requests, return_exceptions=True))
    for attempt in range(retries + 1):
        _stop_at_authentication(results)
        errors = {i: r for i, r in enumerate(results) if isinstance(r, LLMError)}
        failed = list(errors)
        if not failed:
            break
        refused = [i for i in failed if is_length_rejection(errors[i])]
        # one widening per round, however many requests of the batch were refused (one lesson
        # about the counter); it holds even when no retry is left, so later requests fit
        widened = (
            bool(refused)
            and budget is not None
            and budget.refused(errors[refused[0]], f"the {requests[refused[0]].role} request")
        )
        if attempt == retries:
            break
        if widened and budget is not None:  # only a budget widens
            for i in refused:
                requests[i] = _refit(budget, requests[i])
        again = llm.generate_many([fresh(requests[i]) for i in failed], return_exceptions=True)
        for i, result in zip(failed, again, strict=True):
            results[i] = result
    return results


def _stop_at_authentication(results: Sequence[Completion | LLMError]) -> None:
    """A refused credential fails every later call the same way: the run stops at the first."""
    for result in results:
        if isinstance(result, AuthenticationError):
            raise result


def _refit(budget: Budget, request: Request) -> Request:
    """``request`` with ``max_tokens`` fitted again under the widened reserve (the prompt is kept:
    what could give way already did when the request was first fitted)."""
    floor = min_reply(request.output_type, request.min_tokens)
    max_tokens = budget.fit(
        lambda: request.messages,
        max_tokens=request.max_tokens,
        min_output=min(floor, request.max_tokens),
        what=f"the {request.role} request",
    )
    min_tokens = (min(request.min_tokens, max_tokens - 1) or None) if request.min_tokens else None
    return replace(fresh(request), max_tokens=max_tokens, min_tokens=min_tokens)


MIN_STRUCTURED_REPLY = 96
"""The least room a JSON reply (action, verdict, selection, goal) is asked with."""
MIN_PROSE_REPLY = 64


def min_reply(output_type: Any, min_tokens: int | None) -> int:
    """The least room a request is fitted with: a JSON reply's floor, or a paragraph's (at least
    its ``min_tokens``)."""
    return MIN_STRUCTURED_REPLY if output_type is not None else max(min_tokens or 0, MIN_PROSE_REPLY)


def fresh(request: Request) -> Request:
    """The same request as a new object (a retry is never the object that failed)."""
    return Request(
        request.messages,
        request.output_type,
        request.temperature,
        request.max_tokens,
        request.min_tokens,
        request.stop,
        request.seed,
        request.role,
        sampling=request.sampling,
    )
