"""The judge call of ``fabula reconcile``: does a chapter written before an edit contradict the
state after it?

One call per later chapter: the narrative state after the edited chapter (re-derived from the
edited text) and the later chapter's text; the reply lists each contradiction with a passage
quoted from the chapter and what the state holds instead. A quote is checked against the
chapter's text (``agent.quotes``, the matcher every evidence check uses) and kept with
``found``, so the writer sees which quotes can be trusted to be the chapter's own words.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agent.llm import LLM
from agent.llm.budget import Budget
from agent.nst.config import NstConfig
from agent.nst.state import NarrativeState
from agent.quotes import normalize, occurs
from agent.store.records import Chapter
from grammars.base import Grammar

ROLE = "reconcile_judge"
MAX_FINDINGS = 8
REPLY_TOKENS = 1024


class Contradiction(Grammar):
    quote: str = Field(min_length=1, description="a short passage copied exactly from the chapter")
    state: str = Field(min_length=1, description="what the narrative state holds instead")
    explanation: str = Field(min_length=1, description="why the passage contradicts the state, in one sentence")


class Contradictions(Grammar):
    """The chapter's passages that contradict the narrative state (an empty list: none)."""

    contradictions: list[Contradiction] = Field(max_length=MAX_FINDINGS)


SYSTEM = "You check a novel's continuity. Follow the instructions exactly and quote the chapter word for word."


def judge_request(state: NarrativeState, edited: int, chapter: Chapter) -> str:
    return (
        f"The narrative state of the story after chapter {edited}, which the writer has just edited:\n"
        f"{state.render()}\n\n"
        f'Chapter {chapter.index}, "{chapter.title}", written before that edit:\n{chapter.text}\n\n'
        f"List every passage of chapter {chapter.index} that now contradicts the state above: a character "
        "called by another name, a fact, a possession, a place or an event the state holds otherwise. For "
        "each, quote the passage exactly (a sentence or less), say what the state holds, and explain in one "
        "sentence. Reply as JSON; an empty list when nothing contradicts the state."
    )


def judge_chapter(
    llm: LLM, budget: Budget, config: NstConfig, state: NarrativeState, edited: int, chapter: Chapter
) -> list[dict[str, Any]]:
    """The chapter's contradictions of ``state``, each with ``found``: its quote is in the chapter."""
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": judge_request(state, edited, chapter)},
    ]
    reply = budget.generate(
        llm,
        messages,
        Contradictions,
        temperature=0.0,
        max_tokens=REPLY_TOKENS,
        min_output=256,
        role=ROLE,
        what=f"the continuity check of chapter {chapter.index}",
    )
    parsed = reply.parsed if isinstance(reply.parsed, Contradictions) else Contradictions.model_validate(reply.parsed)
    text = normalize(chapter.text)
    return [{**finding.model_dump(), "found": occurs(finding.quote, text)} for finding in parsed.contradictions]
