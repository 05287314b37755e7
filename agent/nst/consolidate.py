"""Consolidating past events when the budget is tight (the paper's Appendix F, issue 13 item 3c).

Past events grow by about four a chapter without bound. When the rendered state outgrows its
share of the context, or the chapter prompt does not leave the chapter room to work, the
oldest arc of chapters (``arc_chapters`` chapters) whose events are no longer recent is
written up by one summarising call as a digest. The digest replaces those events in the
prompt only: every keyed event stays in the state (and ``search`` still finds it). Digests are
appended oldest first and never rewritten, so the digest part of the prompt changes only when
one more arc is consolidated (the prefix cache keeps the rest).
"""

from __future__ import annotations

import json
from typing import Any

from agent.llm import LLM
from agent.llm.budget import Budget
from agent.nst.state import NarrativeState

SYSTEM = "You keep the event log of a long story. Write in the language of the events."
DIGEST_WORDS = 120


def arc_of(chapter: int, arc_chapters: int) -> int:
    return max(0, chapter - 1) // arc_chapters


def next_arc(state: NarrativeState, chapter: int, arc_chapters: int) -> tuple[int, list[str]] | None:
    """The oldest arc with undigested events that ended before the previous chapter (so the
    previous chapter's events, and its arc's, always stay verbatim), and its event keys."""
    done = state.digested()
    arcs: dict[int, list[str]] = {}
    for key in state.past_events:
        if key in done:
            continue
        arcs.setdefault(arc_of(state.event_chapter(key), arc_chapters), []).append(key)
    for arc in sorted(arcs):
        last = (arc + 1) * arc_chapters
        if last <= chapter - 2:
            return arc, arcs[arc]
    return None


def digest_messages(state: NarrativeState, keys: list[str], first: int, last: int) -> list[dict[str, str]]:
    events = "\n".join(json.dumps({k: state.past_events[k]}, ensure_ascii=False) for k in keys)
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f"Past events of chapters {first}-{last}, in order:\n{events}\n\n"
            f"Write one paragraph of at most {DIGEST_WORDS} words that keeps every name, date, number, object "
            "and cause a later chapter may need. Plain prose, no heading.",
        },
    ]


def consolidate_one(
    llm: LLM,
    budget: Budget,
    state: NarrativeState,
    chapter: int,
    *,
    arc_chapters: int,
    max_tokens: int,
    temperature: float,
) -> NarrativeState | None:
    """Digest the next arc (one call); when none is left, merge the two oldest digests into one
    (one call; the oldest part of the digest block changes, rarely). None when neither can be done."""
    found = next_arc(state, chapter, arc_chapters)
    if found is None:
        return merge_oldest(llm, budget, state, max_tokens=max_tokens, temperature=temperature)
    arc, keys = found
    first, last = arc * arc_chapters + 1, (arc + 1) * arc_chapters
    reply = budget.generate(
        llm,
        digest_messages(state, keys, first, last),
        temperature=temperature,
        max_tokens=max_tokens,
        min_output=min(max_tokens, 64),
        role="nst_digest",
        what=f"the digest of chapters {first}-{last}",
    )
    digest: dict[str, Any] = {
        "arc": arc,
        "chapters": [first, last],
        "events": keys,
        "text": " ".join(reply.text.split()),
    }
    budget.note(
        "consolidate_events",
        arc=arc,
        chapters=[first, last],
        events=len(keys),
        truncated=reply.finish_reason == "length",
    )
    return NarrativeState(
        state.characters, state.past_events, state.future_requirements, state.provenance, [*state.digests, digest]
    )


def merge_oldest(
    llm: LLM, budget: Budget, state: NarrativeState, *, max_tokens: int, temperature: float
) -> NarrativeState | None:
    """One digest of the two oldest digests (their events stay in the state, keyed and searchable)."""
    if len(state.digests) < 2:
        return None
    first, second = state.digests[0], state.digests[1]
    span = [first["chapters"][0], second["chapters"][1]]
    messages = [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f"Two summaries of chapters {first['chapters'][0]}-{first['chapters'][1]} "
            f"and {second['chapters'][0]}-{second['chapters'][1]} of a story:\n{first['text']}\n\n"
            f"{second['text']}\n\nMerge them into one paragraph of at most {DIGEST_WORDS} words that keeps "
            "every name, date, number, object and cause a later chapter may need. Plain prose, no heading.",
        },
    ]
    reply = budget.generate(
        llm,
        messages,
        temperature=temperature,
        max_tokens=max_tokens,
        min_output=min(max_tokens, 64),
        role="nst_digest",
        what=f"the digest of chapters {span[0]}-{span[1]}",
    )
    merged = {
        "arc": first["arc"],
        "chapters": span,
        "events": [*first["events"], *second["events"]],
        "text": " ".join(reply.text.split()),
    }
    budget.note("merge_digests", chapters=span, events=len(merged["events"]))
    return NarrativeState(
        state.characters, state.past_events, state.future_requirements, state.provenance, [merged, *state.digests[2:]]
    )
