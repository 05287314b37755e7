"""``fabula continue RUN --words N``: a finished book goes on with new chapters.

What is checked before any model call (:func:`check_continuable`): the run is a finished NstAgent
book or an imported one whose last chapter's state is derived, nothing of an earlier continuation
is left unwritten, the new length fits. Then one planning session (:func:`plan_more`): the planner
asks for the outline of the new chapters only (:func:`plan_continuation`), from what the book has
become rather than from a prompt alone: the premise (the writer's, else the run's), the narrative
state after the last chapter with its open future requirements, and the ends of the last chapters
as written. The reply is held to the chapter outline's grammar and validator
(``agent.nst.plan.planner``); the new chapters are numbered after the book's own, about as long as
its chapters so far, and appended to its outline (the written chapters' entries unchanged), stored
with the run's new configuration in one transaction (``agent.store.lineage.extend``), the run left
``stopped`` at its last chapter. NstAgent then writes on from there as any resume does. The
committed chapters are never changed; an imported book becomes an NstAgent run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent import pipelines
from agent.errors import InputError
from agent.language import instruction, resolve
from agent.llm import LLM
from agent.llm.budget import Budget
from agent.llm.options import LLMOptions
from agent.nst.chapter.sizing import run_budget
from agent.nst.config import NST_DEFAULTS, Planned
from agent.nst.plan.planner import SYSTEM, _outline
from agent.nst.revise.derive import derive_config, is_derived
from agent.nst.state import NarrativeState
from agent.run_context import EventSink, RunContext
from agent.settings import STORY_WORDS
from agent.store import RunStore
from agent.store.lineage.extend import extend_run
from agent.store.records import Chapter
from agent.store.snapshots import ChapterSnapshot
from agent.text import count_words

TAIL_WORDS = 250
"""Words of each of the last chapters' ends the planner is shown (where the book stops)."""
LAST_CHAPTERS = 2
WRITTEN = "(written: the book's own chapter, as it stands)"
"""An imported chapter's outline description: the book has no outline of its own."""


def new_chapter_count(words: int, written: list[Chapter]) -> int:
    """About ``words`` words in chapters as long as the book's so far (at least one)."""
    total = sum(c.words for c in written)
    per = total / len(written) if written and total else 2000
    return max(1, round(words / per))


def written_outline(plan: dict[str, Any], chapters: list[Chapter]) -> list[dict[str, Any]]:
    """The outline entries of the chapters already written: the run's own (a written run), or
    one per chapter as the book has it (an imported book, which has no outline)."""
    stored = plan.get("outline")
    outline: list[Any] = stored if isinstance(stored, list) else []
    if len(outline) >= len(chapters):
        return [dict(item) for item in outline[: len(chapters)]]
    return [
        {
            "id": c.index,
            "title": c.title or f"Chapter {c.index}",
            "description": WRITTEN,
            "target_words": max(c.words, 1),
        }
        for c in chapters
    ]


def _tail(text: str, words: int = TAIL_WORDS) -> str:
    parts = text.split()
    return text.strip() if len(parts) <= words else "... " + " ".join(parts[-words:])


def continuation_request(
    premise: str, state: NarrativeState, written: list[dict[str, Any]], last: list[Chapter], words: int, chapters: int
) -> str:
    """The planner's one request for the new chapters' outline."""
    per = max(1, round(words / chapters))
    titles = "\n".join(f"{c['id']}. {c['title']}" for c in written)
    ends = "\n\n".join(f"## Chapter {c.index}: {c.title or ''}\n{_tail(c.text)}" for c in last)
    return (
        f"Story prompt:\n{premise}\n\n"
        f"The book so far ({len(written)} chapters, finished):\n{titles}\n\n"
        f"Its narrative state after the last chapter:\n{state.render()}\n\n"
        f"How the last chapters end:\n{ends}\n\n"
        f"The book goes on. Write the chapter outline of its next {chapters} chapter(s) as JSON: the book's "
        f"title, then exactly {chapters} chapters with ids 1 to {chapters} (they will follow chapter "
        f"{len(written)}), each with a title, a description of 2-4 sentences of what happens, and target_words. "
        f"The targets must sum to {words} words (about {per} each). Go on from where the book stops, keep every "
        "character and fact of the state, and advance or resolve its open future requirements."
    )


def sequel_request(
    prompt: str,
    title: str,
    state: NarrativeState,
    book_one: list[dict[str, Any]],
    last: list[Chapter],
    words: int,
    chapters: int,
) -> str:
    """The planner's one request for a sequel's outline (``fabula sequel``)."""
    per = max(1, round(words / chapters))
    titles = "\n".join(f"{c['id']}. {c['title']}" for c in book_one)
    ends = "\n\n".join(f"## Chapter {c.index}: {c.title or ''}\n{_tail(c.text)}" for c in last)
    return (
        f"Story prompt:\n{prompt}\n\n"
        f'This book is a sequel. Book one, "{title}" ({len(book_one)} chapters):\n{titles}\n\n'
        f"The narrative state at the end of book one, which this book starts from:\n{state.render()}\n\n"
        f"How book one ends:\n{ends}\n\n"
        f"Write the chapter outline of this new book as JSON: its own title, then exactly {chapters} chapters "
        f"with ids 1 to {chapters}, each with a title, a description of 2-4 sentences of what happens, and "
        f"target_words. The targets must sum to {words} words (about {per} each). It begins after book one "
        "ends, keeps every character and fact of the state, and keeps or resolves the open future "
        "requirements as the story prompt says."
    )


def plan_continuation(
    llm: LLM,
    budget: Budget,
    config: Planned,
    *,
    premise: str,
    state: NarrativeState,
    written: list[dict[str, Any]],
    chapters: list[Chapter],
    words: int,
    sequel_of: str | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """The planned title and the new chapters' outline entries, numbered after ``written``
    (``PlanError`` when no valid outline came back within the planner's attempts). ``sequel_of``:
    the title of the finished book ``written`` and ``chapters`` are; the outline is then a new
    book's, numbered from 1."""
    count = new_chapter_count(words, chapters)
    last = chapters[-LAST_CHAPTERS:]
    asked = (
        sequel_request(premise, sequel_of, state, written, last, words, count)
        if sequel_of is not None
        else continuation_request(premise, state, written, last, words, count)
    )
    # the book's own language (its last chapters', unless --language says otherwise), not the premise's
    language = instruction(resolve(" ".join(c.text[:2000] for c in last) or premise, getattr(config, "language", None)))
    if language:
        asked = f"{asked}\n\n{language}"
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": asked}]
    title, items = _outline(
        llm,
        messages,
        words,
        count,
        config.temperature,
        config.outline_attempts,
        config.gate_low,
        config.gate_high,
        budget,
    )
    offset = 0 if sequel_of is not None else len(written)
    return title, [{**item, "id": item["id"] + offset} for item in items]


def book_words(chapters: list[Chapter]) -> int:
    return sum(c.words or count_words(c.text) for c in chapters)


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
        raise InputError(
            f"{store.run_dir} is a {info.pipeline} run; {command} goes on with an NstAgent run or an imported book"
        )
    chapters = store.chapters()
    if not chapters:
        raise InputError(f"{store.run_dir} has no chapters to go on from")
    if premise is not None and not premise.strip():
        raise InputError(f"{'--premise' if command.endswith('continue') else '--prompt'} is empty")
    if not imported and info.status != "completed":
        unwritten = len(store.plans.get("outline") or []) - info.last_unit
        raise InputError(
            f"{store.run_dir} is not finished ({info.status}, {max(unwritten, 0)} planned chapter(s) "
            f"unwritten): fabula resume {store.run_dir} writes them first"
        )
    last = store.state(chapters[-1].index)
    if imported:
        if not is_derived(last, chapters[-1]):
            raise InputError(
                f"{store.run_dir} is an imported book without a state for its last chapter: fabula "
                f"derive {store.run_dir} first (what follows is planned from that state)"
            )
        narrative = last["narrative"]
    else:
        narrative = ChapterSnapshot.read(last).narrative
        if narrative is None:
            raise InputError(f"{store.run_dir} keeps no narrative state (--no-state): nothing to go on from")
    stored = premise or store.plans.get("premise") or info.config.get("prompt") or derive_config(store).prompt
    return Continuable(
        NarrativeState.from_json(narrative),
        " ".join(str(stored).split()) if premise else str(stored),
        imported,
        book_words(chapters),
    )


def check_continuable(store: RunStore, words: int, premise: str | None = None) -> Continuable:
    """:func:`finished_book`, and ``words`` more fit in one run."""
    found = finished_book(store, premise)
    room = STORY_WORDS.without(found.words_before)
    if words not in room:
        raise InputError(
            f"--words must be between {room.low} and {room.high} (the book has "
            f"{found.words_before} words; a run holds at most {STORY_WORDS.high}), got {words}"
        )
    return found


def new_config(
    store: RunStore,
    found: Continuable,
    words: int,
    premise: str | None,
    llm: LLMOptions,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
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


def plan_more(
    store: RunStore,
    llm: LLMOptions,
    model: LLM,
    *,
    words: int,
    premise: str | None = None,
    events: EventSink | None = None,
    overrides: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Plan the new chapters and store them with the run's new configuration; returns their
    outline entries. The planner's calls are in a ``continue`` session, under unit 0."""
    found = check_continuable(store, words, premise)
    config = new_config(store, found, words, premise, llm, overrides)
    chapters = store.chapters()
    written = written_outline(store.plans.all(), chapters)
    typed = pipelines.get(WRITER).typed(config)
    with store.sessions.hold("continue", transport=llm.transport(), keep_status=True):
        llm.attach_run(model, store)
        with RunContext(store, typed, llm=model, events=events) as ctx, ctx.unit(0):
            _, new = plan_continuation(
                ctx.llm,
                run_budget(ctx),
                typed,
                premise=found.premise,
                state=found.state,
                written=written,
                chapters=chapters,
                words=words,
            )
    # after the session (which keeps the status it found): the one transaction that makes the run
    # stopped with the longer outline; an interrupted planning leaves the run as it was
    record = {
        "after": len(chapters),
        "words": words,
        "chapters": len(new),
        "premise": premise,
        "from_kind": store.info().pipeline,
        "words_before": found.words_before,
    }
    extra = {} if store.plans.get("title") else {"title": "Untitled"}
    extend_run(
        store,
        pipeline=WRITER,
        config=config,
        outline=[*written, *new],
        record=record,
        plan=extra,
        model=llm.model,
        backend=llm.backend,
    )
    return new
