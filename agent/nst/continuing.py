"""``fabula continue RUN --words N``: a finished book (written by NstAgent, or imported and derived)
goes on with new chapters.

What is checked before any model call (:func:`check_continuable`): the run is a finished NstAgent
book or an imported one whose last chapter's state is derived, nothing of an earlier continuation
is left unwritten, the new length fits. Then one planning session (:func:`plan_more`): the new
chapters' outline from the premise, the final state and the ends of the last chapters
(``agent.nst.continuation``), stored with the run's new configuration in one transaction
(``agent.store.extend``), the run left ``stopped`` at its last chapter. NstAgent then writes on
from there as any resume does: its prompt carries the final state, its search covers the whole
book (every committed chapter is in the run's index). The committed chapters are never changed.
An imported book becomes an NstAgent run (its chapters and derived states stay as they are).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent import pipelines
from agent.errors import InputError
from agent.limits import MAX_WORDS, MIN_WORDS
from agent.llm import LLM
from agent.llm.options import LLMOptions
from agent.nst.budget import run_budget
from agent.nst.config import NST_DEFAULTS
from agent.nst.continuation import book_words, plan_continuation, written_outline
from agent.nst.derive import derive_config, is_derived
from agent.nst.state import NarrativeState
from agent.run_context import EventSink, RunContext
from agent.store import RunStore
from agent.store.extend import extend_run
from agent.store.snapshots import ChapterSnapshot

WRITER = "nst"


@dataclass(frozen=True)
class Continuable:
    """A run checked for continuing: its final state, the premise to plan from, its kind."""

    state: NarrativeState
    premise: str
    imported: bool
    words_before: int


def finished_book(store: RunStore, premise: str | None = None, *, command: str = "fabula continue") -> Continuable:
    """A finished book's final state and premise, or ``InputError`` (one line) saying why the run
    is no finished book with a state: a completed NstAgent run, or an imported one derived."""
    info = store.info()
    described = pipelines.known(info.pipeline)
    imported = described is not None and described.takes == "manuscript"
    if not imported and info.pipeline != WRITER:
        raise InputError(f"{store.run_dir} is a {info.pipeline} run; {command} goes on with an NstAgent run "
                         "or an imported book")
    chapters = store.chapters()
    if not chapters:
        raise InputError(f"{store.run_dir} has no chapters to go on from")
    if premise is not None and not premise.strip():
        raise InputError(f"{'--premise' if command.endswith('continue') else '--prompt'} is empty")
    if not imported and info.status != "completed":
        unwritten = len(store.get_plan("outline") or []) - info.last_unit
        raise InputError(f"{store.run_dir} is not finished ({info.status}, {max(unwritten, 0)} planned chapter(s) "
                         f"unwritten): fabula resume {store.run_dir} writes them first")
    last = store.state(chapters[-1].index)
    if imported:
        if not is_derived(last, chapters[-1]):
            raise InputError(f"{store.run_dir} is an imported book without a state for its last chapter: fabula "
                             f"derive {store.run_dir} first (what follows is planned from that state)")
        narrative = last["narrative"]
    else:
        narrative = ChapterSnapshot.read(last).narrative
        if narrative is None:
            raise InputError(f"{store.run_dir} keeps no narrative state (--no-state): nothing to go on from")
    stored = premise or store.get_plan("premise") or info.config.get("prompt") \
        or derive_config(store).prompt
    return Continuable(NarrativeState.from_json(narrative), " ".join(str(stored).split()) if premise else str(stored),
                       imported, book_words(chapters))


def check_continuable(store: RunStore, words: int, premise: str | None = None) -> Continuable:
    """:func:`finished_book`, and ``words`` more fit in one run."""
    found = finished_book(store, premise)
    if words < MIN_WORDS or found.words_before + words > MAX_WORDS:
        raise InputError(f"--words must be between {MIN_WORDS} and {MAX_WORDS - found.words_before} (the book has "
                         f"{found.words_before} words; a run holds at most {MAX_WORDS}), got {words}")
    return found


def new_config(store: RunStore, found: Continuable, words: int, premise: str | None,
               llm: LLMOptions, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The configuration the new chapters are written with: the run's own (an imported book:
    NstAgent's defaults), the book's new length, the premise the writer gave, ``overrides``
    (validated: ``InputError``, one line)."""
    info = store.info()
    pipeline = pipelines.get(WRITER)
    if found.imported:
        base: dict[str, Any] = {**NST_DEFAULTS, "prompt": found.premise}
    else:
        base = {k: v for k, v in info.config.items() if k not in ("pipeline_version", "llm")}
        if premise:
            base["prompt"] = f"{base['prompt']}\n\nThe book goes on: {premise}"
    base.update(overrides or {})
    base["words"] = found.words_before + words
    return pipeline.configure(base, llm)


def plan_more(store: RunStore, llm: LLMOptions, model: LLM, *, words: int, premise: str | None = None,
              events: EventSink | None = None, overrides: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Plan the new chapters and store them with the run's new configuration; returns their
    outline entries. The planner's calls are in a ``continue`` session, under unit 0."""
    found = check_continuable(store, words, premise)
    config = new_config(store, found, words, premise, llm, overrides)
    chapters = store.chapters()
    written = written_outline(store.plan(), chapters)
    typed = pipelines.get(WRITER).typed(config)
    with store.session("continue", transport=llm.transport(), keep_status=True):
        llm.attach_run(model, store)
        with RunContext(store, typed, llm=model, events=events) as ctx, ctx.unit(0):
            _, new = plan_continuation(ctx.llm, run_budget(ctx), typed, premise=found.premise, state=found.state,
                                    written=written, chapters=chapters, words=words)
    # after the session (which keeps the status it found): the one transaction that makes the run
    # stopped with the longer outline; an interrupted planning leaves the run as it was
    record = {"after": len(chapters), "words": words, "chapters": len(new), "premise": premise,
              "from_kind": store.info().pipeline, "words_before": found.words_before}
    extra = {} if store.get_plan("title") else {"title": "Untitled"}
    extend_run(store, pipeline=WRITER, config=config, outline=[*written, *new], record=record, plan=extra,
               model=llm.model, backend=llm.backend)
    return new
