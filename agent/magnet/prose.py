"""Story prose from a Magnet role: the plain paragraph call, the repetition guard, and prose carried inside
a JSON reply (the paper's one-call narrator and goal generator).

Its own module so that the roles (``agent.magnet.roles``), the single-prompt baseline and the recap share
one way of asking for prose.
"""

from __future__ import annotations

from typing import Any

from agent.llm import LLM, Completion, LLMError, Request
from agent.llm.budget import Budget
from agent.llm.sampling import NONE
from agent.magnet.asking import MIN_PROSE_REPLY, ask_many, fresh
from agent.magnet.settings import MagnetSettings
from agent.repetition import measure
from agent.text import split_sentences


def ask_with_prose(
    llm: LLM, request: Request, settings: MagnetSettings, field_name: str, budget: Budget | None = None
) -> Completion | LLMError:
    """A JSON reply whose ``field_name`` is story prose: asked as :func:`ask_many` asks (bounded by
    ``settings.retries``); a reply whose prose is empty once cleaned is asked again, as
    :func:`write_prose` asks an empty paragraph again; then the repetition guard, as for plain prose."""
    for _ in range(settings.retries + 1):
        reply = ask_many(llm, [fresh(request)], settings.retries, budget)[0]
        if isinstance(reply, LLMError):
            return reply
        if clean_paragraph(getattr(reply.parsed, field_name)):
            return _unrepeated_reply(llm, request, settings, reply, field_name, budget)
    return LLMError(f"the {request.role} wrote an empty {field_name} {settings.retries + 1} times")


def write_prose(
    llm: LLM,
    messages: list,
    settings: MagnetSettings,
    *,
    temperature: float,
    max_tokens: int,
    min_tokens: int | None,
    role: str,
    budget: Budget | None = None,
    close_after_words: int | None = None,
) -> tuple[str, bool]:
    """A plain-text paragraph; one cut at ``max_tokens`` is trimmed to its last whole sentence.
    An empty reply counts as a failed call (re-asked within ``settings.retries``). ``messages``
    and ``max_tokens`` come fitted to the context; ``budget`` fits the repetition guard's retry;
    ``close_after_words``: the paragraph ends at its first sentence end past that many words
    (``Sampling.close_after_words``, on the role's sampling)."""
    closing = {"close_after_words": close_after_words}
    request = Request(
        messages,
        None,
        temperature=temperature,
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        role=role,
        sampling=settings.sampling_for(role).model_copy(update=closing) if close_after_words else NONE,
    )
    for _ in range(settings.retries + 1):
        reply = ask_many(llm, [fresh(request)], settings.retries, budget)[0]
        if isinstance(reply, LLMError):
            raise reply
        text, trimmed = _paragraph_of(reply)
        if text:
            return _unrepeated(llm, request, settings, text, trimmed, budget)
    raise LLMError(f"the {role} wrote an empty paragraph {settings.retries + 1} times")


def _paragraph_of(reply: Completion) -> tuple[str, bool]:
    text = clean_paragraph(reply.text)
    if reply.finish_reason == "length":
        sentences = split_sentences(text)
        if len(sentences) > 1:
            return " ".join(sentences[:-1]), True
    return text, False


def _unrepeated(
    llm: LLM, request: Request, settings: MagnetSettings, text: str, trimmed: bool, budget: Budget | None = None
) -> tuple[str, bool]:
    """The repetition guard: a paragraph that repeats itself is asked for once more, with the
    repeated passage quoted and a firmer penalty; the less repetitive of the two is kept (both
    calls are in the ledger, the second with the guard's feedback). A retry that would not fit
    the context is not sent (recorded)."""
    if not settings.repetition_guard:
        return text, trimmed
    found = measure(text)
    if not found.exceeds(settings.repetition_max_rate, settings.repetition_max_span):
        return text, trimmed
    reply = _repetition_retry(llm, request, settings, text, found, budget)
    if reply is None:
        return text, trimmed
    second, second_trimmed = _paragraph_of(reply)
    if second and measure(second).rate < found.rate:
        return second, second_trimmed
    return text, trimmed


def _repetition_retry(
    llm: LLM, request: Request, settings: MagnetSettings, said: str, found: Any, budget: Budget | None
) -> Completion | None:
    """``request`` asked once more after the reply ``said``, with the repeated passage quoted and a
    firmer penalty; None when the retry would not fit the context (recorded) or fails."""
    messages = [
        *request.messages,
        {"role": "assistant", "content": said},
        {"role": "user", "content": found.feedback()},
    ]
    max_tokens = request.max_tokens
    room = budget.room(messages) if budget is not None else None
    if budget is not None and room is not None:
        if room < max(request.min_tokens or 0, MIN_PROSE_REPLY):
            budget.note("skip_repetition_retry", what=f"the {request.role} paragraph", room=room)
            return None
        max_tokens = min(max_tokens, room)
    retry = Request(
        messages,
        request.output_type,
        temperature=request.temperature,
        max_tokens=max_tokens,
        min_tokens=(min(request.min_tokens, max_tokens - 1) or None) if request.min_tokens else None,
        role=request.role,
        sampling=(request.sampling if request.sampling != NONE else settings.sampling_for(request.role)).stronger(),
    )
    reply = ask_many(llm, [retry], 0)[0]
    return None if isinstance(reply, LLMError) else reply


def _unrepeated_reply(
    llm: LLM, request: Request, settings: MagnetSettings, reply: Completion, field_name: str, budget: Budget | None
) -> Completion:
    """The repetition guard for prose inside a JSON reply: the whole reply is asked once more, and
    the one whose prose repeats itself less is kept."""
    text = clean_paragraph(getattr(reply.parsed, field_name))
    if not settings.repetition_guard:
        return reply
    found = measure(text)
    if not found.exceeds(settings.repetition_max_rate, settings.repetition_max_span):
        return reply
    second = _repetition_retry(llm, request, settings, reply.text, found, budget)
    if second is None:
        return reply
    again = clean_paragraph(getattr(second.parsed, field_name))
    return second if again and measure(again).rate < found.rate else reply


def clean_paragraph(text: str) -> str:
    """One paragraph of prose: stray headings and blank-line splits are joined, spaces kept single."""
    lines = [ln.strip() for ln in text.strip().splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    return " ".join(" ".join(lines).split())
