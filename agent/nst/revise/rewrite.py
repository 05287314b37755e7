"""Revising a committed chapter from the writer's note: the model rewrites it, the run keeps every version.

The rewrite has the context the chapter was written with (the system prompt, the story prompt, the
outline, the narrative state before the chapter, the chapter's task and length gate), plus the chapter as
it stands, passages of earlier chapters the note's words find (the writer's search), and the note. It is
drafted under the same gate (``agent.nst.chapter.drafter.draft_until_gate``), stored as the chapter's next
version (the old text stays), and then the chapter's state is re-derived from the new text the way
``fabula edit`` re-derives it (``agent.nst.chapter.rederive``); later chapters are marked stale.

A revision in flight is recorded in the plan (``REVISION_KEY``) before the first call: killed at any
point, the same command (or ``fabula revise RUN --resume``) finds the record and goes on from the step it
reached, so no stored version is written twice and none is lost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from agent.errors import InputError
from agent.llm.types import Message
from agent.nst.chapter.drafter import Drafter, draft_until_gate, record_attempt
from agent.nst.chapter.planned import Plan
from agent.nst.chapter.prompt import chapter_prompt, prose_request, system_prompt
from agent.nst.chapter.rederive import rederive_nst
from agent.nst.chapter.sizing import initial_ratio, run_budget
from agent.nst.config import NstConfig
from agent.nst.state import NarrativeState
from agent.pipelines import Rederived
from agent.run_context import RunContext
from agent.store import RunStore, StoreError
from agent.store.snapshots import ChapterSnapshot
from agent.store.writer.edit import mark_stale
from agent.store.writer.review import record_action

REVISION_KEY = "revision_in_flight"
NOTE_HEADING = "# The writer's note"
"""The heading the note is given under (a scripted author looks for it, as a model reads it)."""
MAX_NOTE_CHARS = 4000
REVISE_ATTEMPTS = 5
"""Drafts of a revision before the closest is kept (marked degraded): a revision is one chapter's
work, not a chapter loop's fifty turns."""
SEARCH_HITS = 4


@dataclass(frozen=True)
class Revised:
    """What a revision did: the chapter, its old and new version, the gate's verdict, the state's."""

    index: int
    old_version: int
    version: int
    words: int
    degraded: bool
    reason: str | None
    rederived: Rederived
    resumed: bool = False


def pending(store: RunStore) -> dict[str, Any] | None:
    """The revision in flight (interrupted), or None."""
    record = store.plans.get(REVISION_KEY)
    return record if isinstance(record, dict) else None


def check_note(note: str) -> str:
    note = note.strip()
    if not note:
        raise InputError("the note is empty: say what the revision should change")
    if len(note) > MAX_NOTE_CHARS:
        raise InputError(f"the note is {len(note)} characters; at most {MAX_NOTE_CHARS}")
    return note


def revision_messages(
    config: NstConfig,
    plan: Plan,
    state: NarrativeState | None,
    index: int,
    title: str,
    text: str,
    note: str,
    passages: list[str],
) -> list[Message]:
    """The conversation that asks for chapter ``index`` rewritten after ``note``."""
    item = plan.chapter(index)
    gate = config.gate(item.target_words)
    opening = chapter_prompt(
        story_prompt=config.prompt,
        outline=plan.chapters,
        state=state,
        completed=index - 1,
        chapter=item,
        gate=gate,
        lookback=False,
    )
    found = "\n".join(f"- {p}" for p in passages) or "(none)"
    revision = (
        f"# The chapter as written\n{text}\n\n# Passages of earlier chapters the note's words find\n{found}"
        f"\n\n{NOTE_HEADING}\n{note}\n\nRewrite chapter {index} following the note. Keep what the note "
        "does not ask to change: the events of the outline, the names and the facts of the narrative state."
    )
    return [
        {"role": "system", "content": system_prompt(with_state=False)},
        {"role": "user", "content": f"{opening}\n\n{revision}\n\n{prose_request(index, title, gate)}"},
    ]


def _passages(store: RunStore, note: str, index: int) -> list[str]:
    if index <= 1:
        return []
    return [
        f"(chapter {h.chapter}) {' '.join(h.text.split())}" for h in store.search(note, k=SEARCH_HITS, before=index)
    ]


def _draft(ctx: RunContext[NstConfig], index: int, note: str) -> tuple[str, int, bool, str | None]:
    """The rewritten chapter under the gate: ``(text, words, degraded, reason)``."""
    store, config = ctx.store, ctx.config
    chapter = store.chapter(index)
    assert chapter is not None
    plan = Plan.of(store.plans.all())
    before = ChapterSnapshot.read(store.state(index - 1))
    current = ChapterSnapshot.read(store.state(index))
    state = NarrativeState.from_json(before.narrative) if config.state and before.narrative is not None else None
    if config.state and state is None and index == 1:
        state = NarrativeState()
    messages = revision_messages(
        config, plan, state, index, chapter.title, chapter.text, note, _passages(store, note, index)
    )
    gate = config.gate(plan.chapter(index).target_words)
    ratio = current.tokens_per_word or initial_ratio(config.prompt, config.tokens_per_word)
    drafter = Drafter.for_config(ctx.llm, gate, ratio, config, "nst_prose", budget=run_budget(ctx))
    outcome = draft_until_gate(drafter, messages, REVISE_ATTEMPTS, on_attempt=record_attempt(ctx))
    return outcome.text, outcome.words, outcome.degraded, outcome.reason


def check_revisable(store: RunStore, index: int) -> None:
    info = store.info()
    if info.pipeline != "nst":
        raise InputError(
            f"revise rewrites NstAgent chapters; this is a {info.pipeline} run (edit it by hand with fabula edit)"
        )
    if store.chapter(index) is None:
        raise InputError(f"chapter {index} does not exist (last committed: {info.last_unit})")
    if "outline" not in store.plans.all():
        raise InputError("the run has no stored outline")


def revise(ctx: RunContext[NstConfig], index: int, note: str, *, source: str = "cli") -> Revised:
    """Rewrite chapter ``index`` following ``note``; resume an interrupted revision of the same chapter.

    Steps, each recorded before the next: the record of the revision (chapter, note, the version it
    revises); the new version (one transaction); the state re-derived; the record removed.
    """
    store = ctx.store
    check_revisable(store, index)
    record = pending(store)
    resumed = record is not None
    if record is not None and (record["chapter"] != index or record["note"] != note):
        raise InputError(
            f"a revision of chapter {record['chapter']} is unfinished; finish it first with "
            f"fabula revise {store.run_dir} --resume"
        )
    chapter = store.chapter(index)
    assert chapter is not None
    if record is None:
        record = {"chapter": index, "note": note, "base_version": chapter.version, "source": source, "at": time.time()}
        store.plans.put(REVISION_KEY, record)
    if chapter.version <= record["base_version"]:  # not stored yet (a fresh revision, or killed while drafting)
        text, words, degraded, reason = _draft(ctx, index, note)
        if not text.strip():
            raise StoreError(f"the revision of chapter {index} came back empty; nothing was stored")
        chapter = store.revise_chapter(index, text, reason=f"revise: {note}")
        mark_stale(store, index, what=f"chapter {index} revised (version {chapter.version})", state_rederived=False)
        store.plans.put(
            REVISION_KEY, {**record, "version": chapter.version, "words": words, "degraded": degraded, "reason": reason}
        )
        record = store.plans.get(REVISION_KEY)
    rederived = rederive_nst(ctx, index)
    mark_stale(store, index, what=f"chapter {index} revised (version {chapter.version})", state_rederived=rederived.ok)
    store.plans.delete(REVISION_KEY)
    record_action(
        store, "revise", unit=index, via=str(record.get("source", source)), note=note, version=chapter.version
    )
    return Revised(
        index,
        int(record["base_version"]),
        chapter.version,
        int(record.get("words", chapter.words)),
        bool(record.get("degraded", False)),
        record.get("reason"),
        rederived,
        resumed,
    )
