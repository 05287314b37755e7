"""Every version of an edited unit, a word-level diff between two, and the units an edit made stale.

A chapter keeps each version in ``chapter_versions`` (the current one included). A Magnet step's
paragraphs are revised one by one and ``paragraph_versions`` keeps only the texts they replaced,
so a step's versions are rebuilt here: version 1 is the step as first written and each edit (one
``replaced_at`` time) makes the next. ``fabula show --versions``, ``fabula export --version N`` and
the view's versions page all read this one module, so they agree on what "version N" is.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace
from typing import Any

from agent.store.lineage.fork import STALE_KEY
from agent.store.records import Chapter, Paragraph
from agent.store.runstore import RunStore
from agent.text import count_words


@dataclass(frozen=True)
class Version:
    """One version of a unit: its number (1: as first written), title, text and why it was made."""

    number: int
    title: str
    text: str
    words: int
    reason: str
    at: float | None


@dataclass(frozen=True)
class Stale:
    """What an edit left behind: the edited unit, and the later units written before it."""

    unit: int
    what: str
    units: list[int]
    state_stale_from: int | None


def chapter_versions(store: RunStore, index: int) -> list[Version]:
    return [
        Version(
            int(r["version"]), str(r["title"] or ""), str(r["text"]), int(r["words"]), str(r["reason"]), r["created_at"]
        )
        for r in store.chapter_versions(index)
    ]


def _step_edits(store: RunStore, step: int) -> tuple[list[Paragraph], dict[int, list[dict[str, Any]]], list[float]]:
    """A step's current paragraphs, each one's replaced texts, and the times of its edits in order."""
    current = [p for p in store.paragraphs() if p.step == step]
    histories = {p.seq: store.paragraph_versions(step, p.seq) for p in current}
    edits = sorted({round(v["replaced_at"], 3) for h in histories.values() for v in h})
    return current, histories, edits


def step_versions(store: RunStore, step: int) -> list[Version]:
    """A Magnet step's texts over its edits (paragraphs joined by blank lines)."""
    current, histories, edits = _step_edits(store, step)
    reasons = {round(v["replaced_at"], 3): str(v["replaced_by"]) for h in histories.values() for v in h}
    out = []
    for number, edit in enumerate([None, *edits], start=1):
        text = "\n\n".join(_paragraph_after(p, histories[p.seq], edit) for p in current)
        out.append(
            Version(number, f"Step {step}", text, count_words(text), "write" if edit is None else reasons[edit], edit)
        )
    return out


def _paragraph_after(paragraph: Paragraph, history: list[dict[str, Any]], edit: float | None) -> str:
    """The paragraph's text right after ``edit`` (None: as first written)."""
    for old in history:  # ordered by version: the first text still standing after the edit
        if edit is None or round(old["replaced_at"], 3) > edit:
            return str(old["text"])
    return paragraph.text


def unit_versions(store: RunStore, unit: int) -> list[Version]:
    return step_versions(store, unit) if store.info().unit_kind == "step" else chapter_versions(store, unit)


def edited_units(store: RunStore) -> list[int]:
    """The units with more than one version, in order."""
    if store.info().unit_kind == "step":
        rows = store.query("SELECT DISTINCT step FROM paragraph_versions ORDER BY step")
    else:
        rows = store.query("SELECT idx FROM chapter_versions GROUP BY idx HAVING count(*) > 1 ORDER BY idx")
    return [int(r[0]) for r in rows]


def stale(store: RunStore) -> Stale | None:
    """The units written before the earliest edit (``fabula fork RUN --at N`` continues from it)."""
    record = store.plans.get(STALE_KEY)
    if not isinstance(record, dict) or "unit" not in record:
        return None
    unit, last = int(record["unit"]), store.info().last_unit
    stale_from = record.get("state_stale_from", unit + (1 if record.get("state_rederived") else 0))
    return Stale(unit, str(record.get("what", "")), list(range(unit + 1, last + 1)), stale_from)


_TOKEN = re.compile(r"\s+|[^\s]+")


def word_diff(old: str, new: str) -> list[tuple[str, str]]:
    """``(op, text)`` runs turning ``old`` into ``new`` word by word: op is ``same``, ``del`` or ``ins``.
    Joining the ``same`` and ``ins`` runs gives ``new`` back exactly; ``same`` and ``del`` give ``old``
    up to spacing (a change of whitespace alone is not a change a reader sees, so it is not marked)."""
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal" or (op == "replace" and not "".join(a[i1:i2] + b[j1:j2]).strip()):
            out.append(("same", "".join(b[j1:j2])))
            continue
        if i2 > i1:
            out.append(("del", "".join(a[i1:i2])))
        if j2 > j1:
            out.append(("ins", "".join(b[j1:j2])))
    return _grouped(out)


GLUE_WORDS = 2
"""A run of at most this many unchanged words between two changes is shown inside the change (struck
out and inserted again), so a rewritten passage reads as the old sentence, then the new one, not as
old and new words interleaved ("Short new steps chapter ...")."""


def _grouped(runs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each stretch of changes, with the short unchanged runs inside it, as one ``del`` then one ``ins``."""
    out: list[tuple[str, str]] = []
    deleted: list[str] = []
    inserted: list[str] = []

    def flush() -> None:
        if deleted:
            out.append(("del", "".join(deleted)))
        if inserted:
            out.append(("ins", "".join(inserted)))
        deleted.clear()
        inserted.clear()

    merged: list[tuple[str, str]] = []
    for op, text in runs:  # neighbouring unchanged runs (a change of spacing alone among them) as one
        if merged and op == "same" and merged[-1][0] == "same":
            merged[-1] = ("same", merged[-1][1] + text)
        else:
            merged.append((op, text))
    runs = merged
    for n, (op, text) in enumerate(runs):
        if op == "del":
            deleted.append(text)
        elif op == "ins":
            inserted.append(text)
        elif (deleted or inserted) and n + 1 < len(runs) and count_words(text) <= GLUE_WORDS:
            deleted.append(text)  # glue between two changes: part of both sides
            inserted.append(text)
        else:
            flush()
            out.append((op, text))
    flush()
    return out


def changed_words(diff: list[tuple[str, str]]) -> tuple[int, int]:
    """Words removed and words added by a diff."""
    return (sum(count_words(t) for op, t in diff if op == "del"), sum(count_words(t) for op, t in diff if op == "ins"))


class AtVersion:
    """A read-only view of a run whose chapters (or Magnet paragraphs) read as they were at version
    ``number`` (each unit at that version, or its last one when it has fewer): what ``fabula export
    --version N`` writes. Everything else is the run's own."""

    def __init__(self, store: RunStore, number: int) -> None:
        self._store, self._number = store, number

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def chapters(self) -> list[Chapter]:
        out = []
        for chapter in self._store.chapters():
            versions = chapter_versions(self._store, chapter.index)
            if versions and chapter.version > self._number:
                old = versions[min(self._number, len(versions)) - 1]
                chapter = replace(chapter, title=old.title, text=old.text, words=old.words, version=old.number)
            out.append(chapter)
        return out

    def paragraphs(self) -> list[Paragraph]:
        out: list[Paragraph] = []
        for step in sorted({p.step for p in self._store.paragraphs()}):
            current, histories, edits = _step_edits(self._store, step)
            edit = None if self._number == 1 else edits[min(self._number - 1, len(edits)) - 1] if edits else None
            for paragraph in current:
                text = _paragraph_after(paragraph, histories[paragraph.seq], edit) if edits else paragraph.text
                out.append(replace(paragraph, text=text, words=count_words(text)))
        return out
