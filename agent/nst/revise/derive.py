"""``fabula derive RUN``: NstAgent's narrative state of a book fabula did not write, from its text.

Each chapter of an imported run gets the state NstAgent would have stored after writing it, through
the path a written chapter's update takes (:meth:`agent.nst.chapter.loop.ChapterLoop.update_from_text`):
one ``update`` call per chapter, evidence checked against that chapter's text, the call in the
run's ledger, the state stored with the chapter with a ``derived`` record.

Resumable: a chapter is done once its state is stored; a failed chapter is marked
``derived.ok = false`` with the reason and the next goes on from the last derived state; an
unreachable server stops the derive, nothing marked. ``derive`` again asks only the chapters
without a state. The step by step: docs/design/derive.md.

One call at a time within a run: chapter k's update needs the state after chapter k-1 (why, and
what a server's concurrent slots serve instead: docs/design/derive.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.limits import MAX_WORDS
from agent.llm import LLM, EndpointUnavailableError, LLMError
from agent.llm.options import LLMOptions
from agent.nst.chapter.loop import ChapterLoop
from agent.nst.chapter.planned import Plan
from agent.nst.chapter.sizing import initial_ratio, run_budget
from agent.nst.chapter.update import ASK_FROM_BOOK
from agent.nst.config import NST_DEFAULTS, NstConfig
from agent.nst.state import NarrativeState
from agent.run_context import RunContext
from agent.store import RunStore
from agent.store.records import Chapter
from agent.store.reports.timeline import DERIVED


@dataclass(frozen=True)
class Step:
    """One chapter derived (or not): what the terminal shows after it."""

    index: int
    position: int
    """1-based among the chapters this derive asks."""
    todo: int
    """Chapters this derive asks in all."""
    title: str
    ok: bool
    line: str
    calls: int
    elapsed_s: float
    eta_s: float | None


@dataclass
class Derived:
    """What one derive did: chapters derived, failed, already done before it; ``stopped``: why it
    stopped before the last chapter (the server unavailable), else None."""

    done: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    skipped: int = 0
    calls: int = 0
    stopped: str | None = None


def derive_config(store: RunStore, **settings: Any) -> NstConfig:
    """The NstAgent settings an imported book's updates are asked with: the defaults, a premise
    naming the book, its length (``settings``: others, e.g. ``update_max_tokens``)."""
    title = store.plans.get("title") or "an untitled book"
    author = store.plans.get("author")
    premise = (
        f"{title}{f' by {author}' if author else ''}: a book written elsewhere. Its chapters are given "
        "one at a time as the author wrote them; record what each establishes."
    )
    words = max(1, sum(c.words for c in store.chapters()))
    return NstConfig.model_validate(
        {
            **NST_DEFAULTS,
            "prompt": premise,
            "words": min(words, MAX_WORDS),
            **{k: v for k, v in settings.items() if v is not None},
        }
    )


def book_plan(chapters: list[Chapter]) -> Plan:
    """The outline an update prompt shows: the book's own chapters, titled as found, sized as they are."""
    return Plan.of(
        {
            "outline": [
                {
                    "id": c.index,
                    "title": c.title or f"Chapter {c.index}",
                    "description": "(the book's own chapter, given below as written)",
                    "target_words": max(c.words, 1),
                }
                for c in chapters
            ]
        }
    )


def is_derived(state: Any, chapter: Chapter | None = None) -> bool:
    """A state derived from the chapter's text as it stands (``chapter`` given: its current
    version; a chapter edited since, ``fabula edit``, is derived again)."""
    if not (isinstance(state, dict) and isinstance(state.get("narrative"), dict)):
        return False
    record = state.get(DERIVED) or {}
    return bool(record.get("ok")) and (chapter is None or record.get("version") == chapter.version)


def todo(store: RunStore) -> list[int]:
    """The chapters without a derived state, in order (never asked, failed, or left by a kill)."""
    return [c.index for c in store.chapters() if not is_derived(store.state(c.index), c)]


def failed(store: RunStore) -> list[int]:
    out = []
    for chapter in store.chapters():
        state = store.state(chapter.index)
        if isinstance(state, dict) and (state.get(DERIVED) or {}).get("ok") is False:
            out.append(chapter.index)
    return out


def _before(store: RunStore, index: int) -> NarrativeState:
    """The last state derived before chapter ``index`` (empty before the first)."""
    for earlier in range(index - 1, 0, -1):
        state = store.state(earlier)
        if is_derived(state):
            return NarrativeState.from_json(state["narrative"])
    return NarrativeState.from_json(None)


def _mark(store: RunStore, chapter: Chapter, record: dict[str, Any], narrative: dict[str, Any] | None) -> None:
    state = store.state(chapter.index)
    state = dict(state) if isinstance(state, dict) else {}
    attempts = int((state.get(DERIVED) or {}).get("attempts", 0)) + 1
    if narrative is not None:
        state["narrative"] = narrative
    else:
        state.pop("narrative", None)
    state[DERIVED] = {**record, "version": chapter.version, "attempts": attempts, "at": time.time()}
    store.replace_state(chapter.index, state)


def _first_line(error: str) -> str:
    first = (error.splitlines() or ["failed"])[0]
    return first if len(first) <= 200 else first[:197] + "..."


def derive_chapter(ctx: RunContext[NstConfig], chapter: Chapter, plan: Plan) -> tuple[bool, str]:
    """Chapter ``chapter``'s state from its text and the state before it, by one update call
    (through the chapter loop's update path); stored with the chapter, or the chapter marked."""
    store, config = ctx.store, ctx.config
    start = ctx.calls
    error = None
    with ctx.unit(chapter.index):
        try:
            loop = ChapterLoop(
                ctx.llm,
                store,
                plan=plan,
                story_prompt=config.prompt,
                state=_before(store, chapter.index),
                index=chapter.index,
                config=config,
                ratio=initial_ratio(config.prompt, config.tokens_per_word),
                emit=ctx.emit,
                budget=run_budget(ctx),
            )
            ok = loop.update_from_text(chapter.title, chapter.text, ask=ASK_FROM_BOOK)
            if not ok or loop.new_state is None:
                error = loop.last_error or "the update was not applied"
        except EndpointUnavailableError:
            raise  # not this chapter's failure: the derive stops, and continues from here next time
        except LLMError as exc:
            error = str(exc)
    calls = ctx.calls - start
    if error is not None:
        _mark(store, chapter, {"ok": False, "error": _first_line(error), "calls": calls}, None)
        return False, f"failed ({_first_line(error)}); marked, derive again retries it"
    state = loop.new_state
    assert state is not None, "an update without an error left its state"
    applied = loop.last_update
    entries = applied.applied if applied is not None else 0
    refused = len(applied.refused) if applied is not None else 0
    _mark(store, chapter, {"ok": True, "calls": calls, "applied": entries, "refused": refused}, state.to_json())
    refusals = f", {refused} refused for evidence not in the chapter" if refused else ""
    if not entries:
        return True, "nothing found in this chapter (no character, event or requirement)" + refusals
    return True, f"{entries} entries applied" + refusals + f"; the state now holds {holds(state)}"


def holds(state: NarrativeState) -> str:
    """What a derived state holds, in a writer's words: ``3 characters, 12 past events, 2 open requirements``."""
    return (
        f"{len(state.characters)} characters, {len(state.past_events)} past events, "
        f"{len(state.future_requirements)} open requirements"
    )


def derived_state(store: RunStore) -> NarrativeState | None:
    """The state after the last chapter that has a derived one (None when no chapter has)."""
    for chapter in reversed(store.chapters()):
        state = store.state(chapter.index)
        if is_derived(state):
            return NarrativeState.from_json(state.get("narrative"))
    return None


def is_empty(state: NarrativeState | None) -> bool:
    """Nothing was derived: no character, past event or open requirement."""
    return state is None or not (state.characters or state.past_events or state.future_requirements)


def derive_book(ctx: RunContext[NstConfig], on_step: Callable[[Step], None] | None = None) -> Derived:
    """Every chapter without a derived state, in order; each stored as it is done."""
    store = ctx.store
    chapters = store.chapters()
    plan = book_plan(chapters)
    asked = [c for c in chapters if not is_derived(store.state(c.index), c)]
    result = Derived(skipped=len(chapters) - len(asked))
    started = time.monotonic()
    for position, chapter in enumerate(asked, start=1):
        before = ctx.calls
        try:
            ok, line = derive_chapter(ctx, chapter, plan)
        except EndpointUnavailableError as exc:
            result.calls += ctx.calls - before
            result.stopped = f"the server is unavailable at chapter {chapter.index} ({_first_line(str(exc))})"
            return result
        (result.done if ok else result.failed).append(chapter.index)
        result.calls += ctx.calls - before
        elapsed = time.monotonic() - started
        left = len(asked) - position
        eta = elapsed / position * left if left else 0.0
        if on_step is not None:
            on_step(
                Step(chapter.index, position, len(asked), chapter.title, ok, line, ctx.calls - before, elapsed, eta)
            )
    return result


def derive(
    store: RunStore,
    llm: LLMOptions,
    model: LLM,
    *,
    on_step: Callable[[Step], None] | None = None,
    events: Any = None,
    update_max_tokens: int | None = None,
) -> Derived:
    """Derive the state of the chapters that lack one, in a ``derive`` session of the run (one
    writer at a time; the run's status stays as it was), on ``model`` (left open)."""
    config = derive_config(store, update_max_tokens=update_max_tokens)
    with store.sessions.hold("derive", transport=llm.transport(), keep_status=True):
        llm.attach_run(model, store)
        with RunContext(store, config, llm=model, events=events) as ctx:
            return derive_book(ctx, on_step)
