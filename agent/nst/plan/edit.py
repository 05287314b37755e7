"""Checking and storing a writer's edit of a run's frozen outline (``fabula outline --edit``/``--file``).

An edited outline is held to every rule the planner holds a model's outline to, and to the rules
its grammar enforces while decoding (``agent.nst.plan.planner.validate_outline`` with ``strict``):
a title, the same number of chapters as planned, ids 1..n, non-empty titles and summaries,
each target inside the gate around an even share, the targets summing to inside the gate of
the story's length. Chapters already written keep their outline entry (their text was written
from it; ``fabula edit`` changes a written chapter), the others and the title may change. The
previous outline stays in the plan's edit record (``agent.store.writer.plan_edits``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent import pipelines
from agent.errors import InputError
from agent.nst.config import Planned
from agent.nst.plan.planner import validate_outline
from agent.store import RunStore
from agent.store.lineage.extend import continuations
from agent.store.writer.plan_edits import revise_plan
from grammars.nst import Outline, OutlineChapter


class OutlineEditError(InputError):
    """An edited outline that breaks a planner rule; nothing is stored."""


@dataclass(frozen=True)
class OutlineEdit:
    """What an accepted edit changed: the chapters whose entries differ, and the title."""

    chapters: list[int]
    title: bool

    @property
    def empty(self) -> bool:
        return not self.chapters and not self.title


def stored_outline(store: RunStore) -> tuple[str | None, list[dict[str, Any]]]:
    """The run's title and frozen outline; ``InputError`` if the run has none (yet)."""
    info = store.info()
    described = pipelines.known(info.pipeline)
    if described is None or not described.planned:
        planned = pipelines.spoken([name for name in pipelines.names() if pipelines.get(name).planned])
        raise InputError(f"{store.run_dir} is a {info.pipeline} run; only {planned} runs write from an outline")
    plan = store.plans.all()
    if not isinstance(plan.get("outline"), list):
        raise InputError(
            f"{store.run_dir} has no outline yet (its planning did not finish): fabula resume {store.run_dir} plans it"
        )
    title = plan.get("title")
    return title if isinstance(title, str) else None, plan["outline"]


def check(store: RunStore, title: str, chapters: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The edited title and chapters as they would be stored, or ``OutlineEditError`` (one line)."""
    info = store.info()
    config = pipelines.get(info.pipeline).typed(info.config)  # the settings the chapters are written with
    assert isinstance(config, Planned)
    _, current = stored_outline(store)
    after, words = _continued(store, config.words)
    try:
        if len(chapters) != len(current):
            raise ValueError(f"the outline has {len(chapters)} chapters; write {len(current)}")
        # a continued book: the new chapters are held to the rules of their own plan (ids renumbered
        # from 1 there), the book's own chapters before them are written and stay as they are
        part = [{**c, "id": c.get("id", 0) - after} if isinstance(c.get("id"), int) else c for c in chapters[after:]]
        outline = Outline.model_construct(title=title, chapters=[OutlineChapter.model_construct(**c) for c in part])
        checked = validate_outline(outline, words, len(current) - after, config.gate_low, config.gate_high, strict=True)
        checked = [*[dict(c) for c in chapters[:after]], *[{**c, "id": c["id"] + after} for c in checked]]
        Outline.model_validate({"title": title, "chapters": checked})  # the grammar's own types, last
    except ValueError as exc:
        raise OutlineEditError(
            f"the edited outline is refused: {str(exc).splitlines()[0]}; nothing was stored"
        ) from None
    written = info.last_unit
    for old, new in zip(current[:written], checked, strict=False):
        if _entry(old) != _entry(new):
            raise OutlineEditError(
                f"the edited outline is refused: chapter {old['id']} is already written, its "
                "outline entry cannot change (fabula edit --chapter changes its text); "
                "nothing was stored"
            )
    return " ".join(title.split()), checked


def _continued(store: RunStore, words: int) -> tuple[int, int]:
    """The chapters before the latest continuation (``fabula continue``) and the words it added;
    (0, the story's words) for a book planned in one piece."""
    latest = continuations(store)[-1:]
    if not latest:
        return 0, words
    return int(latest[0]["after"]), int(latest[0]["words"])


def apply(store: RunStore, title: str, chapters: list[dict[str, Any]]) -> OutlineEdit:
    """Check the edit and store it (the previous outline kept in the edit record)."""
    new_title, checked = check(store, title, chapters)
    old_title, current = stored_outline(store)
    changed = [new["id"] for old, new in zip(current, checked, strict=True) if _entry(old) != _entry(new)]
    edit = OutlineEdit(changed, new_title != (old_title or ""))
    if not edit.empty:
        values: dict[str, Any] = {"outline": [{**old, **new} for old, new in zip(current, checked, strict=True)]}
        if edit.title:
            values["title"] = new_title
        revise_plan(store, values, by="outline")
    return edit


def _entry(chapter: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(chapter.get(k) for k in ("id", "title", "target_words", "description"))
