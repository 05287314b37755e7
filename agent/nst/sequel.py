"""``fabula sequel RUN --out RUN2 --words N``: a new book that starts where a finished one ended.

Book two is a run of its own (NstAgent), written as any run from its prompt, except that (1) its
initial state, the state its chapter 1 is written from, is book one's final state: every character
with its facts, every past event, the open future requirements (all kept, but those the writer
names resolved: ``--resolve KEY``); (2) its outline is planned from book one as it ended (that
state, the end of its last chapters, the prompt), in chapters as long as book one's
(``agent.nst.revise.continuation``), and its prompt says which book it follows; (3) its plan names the
series (``agent.store.lineage.series``): the writer's search covers book one, read-only, and the export
names the series.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent import pipelines
from agent.errors import InputError
from agent.llm import LLM
from agent.llm.options import LLMOptions
from agent.nst.chapter.sizing import run_budget
from agent.nst.config import NST_DEFAULTS
from agent.nst.revise.continuation import WRITER, finished_book, plan_continuation, written_outline
from agent.nst.runner import write
from agent.nst.state import NarrativeState
from agent.run_context import EventSink, RunContext
from agent.store import RunStore
from agent.store.export.markdown import story_title
from agent.store.lineage.series import SERIES_KEY, sequel_record
from agent.store.records import Chapter
from agent.store.writer.review import REVIEW_KEY

NAMED = 20
"""Characters and open threads named in the sequel's prompt at most (the state holds them all)."""


@dataclass(frozen=True)
class Sequel:
    """What book two starts from."""

    config: dict[str, Any]
    """Its settings (before the model's are added)."""
    initial_state: dict[str, Any]
    series: dict[str, Any]
    book_one: list[dict[str, Any]]
    """Book one's outline entries (its own, or one per chapter of an imported book)."""
    chapters: list[Chapter]
    """Book one's chapters: the planner is shown how it ends, and book two keeps its chapter length."""
    title: str


def carried_state(state: NarrativeState, resolve: list[str]) -> NarrativeState:
    """Book one's final state with the requirements ``resolve`` names closed (``InputError`` for a
    key that is not open)."""
    unknown = [key for key in resolve if key not in state.future_requirements]
    if unknown:
        listed = ", ".join(sorted(state.future_requirements)[:12]) or "none"
        raise InputError(f"--resolve {unknown[0]}: book one has no such open requirement (open: {listed})")
    data = state.to_json()
    data["future_requirements"] = {k: v for k, v in state.future_requirements.items() if k not in resolve}
    return NarrativeState.from_json(data)


def sequel_prompt(prompt: str | None, title: str, state: NarrativeState, series: dict[str, Any]) -> str:
    """Book two's story prompt: the writer's, and which book it follows with what was left open."""
    given = " ".join(prompt.split()) if prompt else f'The story of "{title}" goes on.'
    names = list(state.characters)[:NAMED]
    threads = [f"{text}" for text in list(state.future_requirements.values())[:NAMED]]
    told = (
        f'\n\nThis is book {series["index"]} of the series "{series["name"]}"; it follows "{title}", '
        "and its characters and their facts carry over."
    )
    if names:
        told += f' Characters at the end of "{title}": {", ".join(names)}.'
    if threads:
        told += " Left open there: " + " ".join(t if t.endswith(".") else t + "." for t in threads)
    return given + told


def plan_sequel(
    first: RunStore, *, prompt: str | None, words: int, resolve: list[str], overrides: dict[str, Any] | None = None
) -> Sequel:
    """Book two's configuration, initial state and series record (nothing is written)."""
    if prompt is not None and not prompt.strip():
        raise InputError("--prompt is empty")
    found = finished_book(first, command="fabula sequel")
    pipelines.get(WRITER).check_words(words)
    state = carried_state(found.state, resolve)
    title = story_title(first)
    series = sequel_record(first, title)
    info = first.info()
    base = (
        dict(NST_DEFAULTS)
        if found.imported
        else {k: v for k, v in info.config.items() if k not in ("pipeline_version", "llm", "prompt_id")}
    )
    base.update(overrides or {})
    base.update(prompt=sequel_prompt(prompt, title, state, series), words=words, prompt_id=None)
    pipelines.get(WRITER).configure(base, LLMOptions())  # every setting checked before anything is created
    chapters = first.chapters()
    return Sequel(
        base, {"narrative": state.to_json()}, series, written_outline(first.plans.all(), chapters), chapters, title
    )


def write_sequel(
    out: str | Path,
    sequel: Sequel,
    llm: LLMOptions,
    model: LLM,
    *,
    events: EventSink | None = None,
    plan_only: bool = False,
    review: dict[str, Any] | None = None,
    notes: dict[str, Any] | None = None,
) -> RunStore:
    """Create book two in ``out`` and write it (``plan_only``: stop after its outline); returns the
    open store. Its outline is planned from book one as it ended (``agent.nst.revise.continuation``), in
    book two's ``start`` session under unit 0; the chapters are then written as any NstAgent run's.
    A start stopped before the outline is stored is planned by NstAgent's own planner on resume.
    ``review``: the run stops for the writer after its outline and chapters (``agent.store.writer.review``).
    ``notes``: plan entries stored first (the writer's ``style`` guide)."""
    pipeline = pipelines.get(WRITER)
    full = pipeline.configure(sequel.config, llm)
    store = RunStore.create(
        out,
        pipeline=WRITER,
        config=full,
        unit_kind=pipeline.unit,
        model=llm.model,
        backend=llm.backend,
        initial_state=sequel.initial_state,
    )
    try:
        store.plans.put(SERIES_KEY, sequel.series)
        if review is not None:
            store.plans.put(REVIEW_KEY, review)
        for key, value in (notes or {}).items():
            store.plans.put(key, value)
        typed = pipeline.typed(full)
        with store.sessions.hold("start", transport=llm.transport()):
            llm.attach_run(model, store)
            with RunContext(store, typed, llm=model, events=events, plan_only=plan_only) as ctx:
                with ctx.unit(0):
                    title, outline = plan_continuation(
                        ctx.llm,
                        run_budget(ctx),
                        typed,
                        premise=typed.prompt,
                        state=NarrativeState.from_json(sequel.initial_state["narrative"]),
                        written=sequel.book_one,
                        chapters=sequel.chapters,
                        words=typed.words,
                        sequel_of=sequel.title,
                    )
                store.plans.update({"title": title, "source": "sequel", "outline": outline})
                write(ctx)
    except BaseException:
        store.close()
        raise
    return store
