"""Editing a committed unit by hand: a new version of its text, and what that makes stale.

The old text stays as a version (chapters: ``chapter_versions``; Magnet paragraphs:
``paragraph_versions``). A Magnet step's edited world variables become the stored state at
that step. Units after the edited one were written from the old text, so the run's plan
records ``stale_after`` (the edited unit, why, and from which unit on the stored states do not
follow from the current text); ``fabula fork RUN --at N`` then continues a copy from N+1.
Re-deriving an NstAgent chapter's state from edited text needs the pipeline's update step
(``agent.pipelines.rederive``); until it has run, the edited chapter's own state counts as stale.
"""

from __future__ import annotations

import json
import time
from typing import Any

from agent import keyvalue
from agent.store.errors import CommitError, StoreError
from agent.store.lineage.fork import STALE_KEY
from agent.store.records import Chapter, Paragraph
from agent.store.runstore import RunStore
from agent.store.snapshots import WorldTable
from agent.store.writer.plan_edits import revise_plan

VARIABLES_HEADER = "--- world variables (one per line: key = JSON value; delete a line to keep it as it is) ---"


def mark_stale(store: RunStore, unit: int, *, what: str, state_rederived: bool) -> dict[str, Any] | None:
    """Record that units after ``unit`` predate an edit (the earliest edit wins) and from which unit
    on the stored states do not follow from the current text (``state_stale_from``: ``unit`` itself
    when its state was not re-derived from the edit, else ``unit + 1``; None when no state is
    stale). Returns the record, or ``None`` (and no record) when nothing is stale."""
    last = store.info().last_unit
    previous = store.plans.get(STALE_KEY)
    previous = previous if isinstance(previous, dict) else {}
    first = min(unit, previous["unit"]) if "unit" in previous else unit
    earlier = _stale_from(previous)
    mine = unit + 1 if state_rederived else unit
    stale_from: int | None = earlier if earlier is not None and earlier < unit else mine
    stale_from = stale_from if stale_from is not None and stale_from <= last else None
    if first >= last and stale_from is None:
        store.plans.delete(STALE_KEY)
        return None
    record = {
        "unit": first,
        "last_unit": last,
        "what": what,
        "state_rederived": stale_from is None or stale_from > first,
        "state_stale_from": stale_from,
        "at": time.time(),
    }
    store.plans.put(STALE_KEY, record)
    return record


def _stale_from(record: dict[str, Any]) -> int | None:
    """The first unit whose state is stale, from a record (older records say only ``state_rederived``)."""
    if not record:
        return None
    if "state_stale_from" in record:
        return record["state_stale_from"]
    return record["unit"] + (1 if record.get("state_rederived") else 0)


def state_stale_from(store: RunStore) -> int | None:
    """The first unit whose stored state does not follow from the current text (None: none)."""
    record = store.plans.get(STALE_KEY)
    return _stale_from(record) if isinstance(record, dict) else None


def edit_chapter(store: RunStore, index: int, text: str, *, title: str | None = None) -> Chapter:
    """Store ``text`` as the next version of chapter ``index`` and mark what follows stale."""
    current = store.chapter(index)
    if current is None:
        raise CommitError(f"chapter {index} does not exist (last committed: {store.info().last_unit})")
    if not text.strip():
        raise StoreError("the edited chapter is empty")
    chapter = store.revise_chapter(index, text, title=title, reason="edit")
    if title is not None:
        _retitle_in_outline(store, index, title)
    mark_stale(store, index, what=f"chapter {index} edited (version {chapter.version})", state_rederived=False)
    return chapter


def _retitle_in_outline(store: RunStore, index: int, title: str) -> None:
    """A chapter retitled by hand is retitled in the outline too: its titles head the book
    (agent.store.export.titles)."""
    outline = store.plans.get("outline")
    if not isinstance(outline, list):
        return
    entries = [
        {**item, "title": " ".join(title.split())} if isinstance(item, dict) and item.get("id", n) == index else item
        for n, item in enumerate(outline, start=1)
    ]
    revise_plan(store, {"outline": entries}, by="edit")


def step_document(store: RunStore, step: int) -> str:
    """What ``$EDITOR`` shows for a Magnet step: its paragraphs, then its world variables."""
    paragraphs = [p for p in store.paragraphs() if p.step == step]
    if not paragraphs and step not in {s["step"] for s in store.steps()}:
        raise CommitError(f"step {step} does not exist (last committed: {store.info().last_unit})")
    table = WorldTable.of(store.state(step))
    variables = table.items() if table is not None else {}
    lines = [f"{key} = {json.dumps(value.get('value'), ensure_ascii=False)}" for key, value in variables.items()]
    return "\n\n".join(p.text for p in paragraphs) + "\n\n" + VARIABLES_HEADER + "\n" + "\n".join(lines) + "\n"


def parse_step_document(document: str) -> tuple[list[str], dict[str, Any]]:
    """Paragraphs (split at blank lines) and ``key = JSON value`` lines after the header."""
    body, _, tail = document.partition(VARIABLES_HEADER)
    paragraphs = [p.strip() for p in body.replace("\r\n", "\n").split("\n\n") if p.strip()]
    variables: dict[str, Any] = {}
    for number, line in enumerate(tail.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pair = keyvalue.split(line)
        if pair is None:
            raise StoreError(f"world variable line {number}: expected `key = value`, got {line!r}")
        try:
            variables[pair[0]] = keyvalue.value(pair[1], strip=True)
        except keyvalue.MalformedValue as exc:
            raise StoreError(f"world variable line {number}: {pair[0]}: {exc}") from None
    return paragraphs, variables


def edit_step(
    store: RunStore, step: int, paragraphs: list[str] | None = None, variables: dict[str, Any] | None = None
) -> tuple[list[Paragraph], list[str]]:
    """Replace a Magnet step's paragraph texts (same number of paragraphs) and set world
    variables in the state stored at that step; returns the new paragraphs and changed keys."""
    current = [p for p in store.paragraphs() if p.step == step]
    if step not in {s["step"] for s in store.steps()}:
        raise CommitError(f"step {step} does not exist (last committed: {store.info().last_unit})")
    revised: list[Paragraph] = []
    if paragraphs is not None:
        if len(paragraphs) != len(current):
            raise StoreError(
                f"step {step} has {len(current)} paragraph(s); the edit has {len(paragraphs)} "
                "(keep one blank-line-separated block per paragraph)"
            )
        revised = [
            store.revise_paragraph(step, p.seq, text, reason="edit")
            for p, text in zip(current, paragraphs, strict=True)
            if text != p.text
        ]
    changed: list[str] = []
    if variables:
        state = store.state(step)
        table = WorldTable.of(state)
        if table is None:
            raise StoreError(f"step {step} has no world variables (a run without structured state?)")
        known = table.items()
        unknown = sorted(set(variables) - set(known))
        if unknown:
            raise StoreError(
                f"step {step} has no world variable {', '.join(map(repr, unknown[:5]))}; an edit "
                f"changes the variables the story has ({', '.join(sorted(known)[:12]) or 'none'}"
                f"{', ...' if len(known) > 12 else ''})"
            )
        for key, value in variables.items():
            old = known.get(key)
            if old is not None and json.dumps(old.get("value"), sort_keys=True) == json.dumps(value, sort_keys=True):
                continue
            table.set(key, value, step=step, by="edit")
            changed.append(key)
        if changed:
            store.replace_state(step, state)
    if revised or changed:
        what = f"step {step} edited" + (f" (variables {', '.join(changed)})" if changed else "")
        mark_stale(store, step, what=what, state_rederived=True)
    return revised, changed
