"""The ``nst`` pipeline: plan once, then write, check and commit one chapter at a time.

Each committed chapter carries the state after it (``agent.store.snapshots.ChapterSnapshot``:
the narrative state, the measured tokens-per-word ratio and the chapter's statistics), so any
chapter's context can be rebuilt and a resume continues from the last committed chapter with
exactly that state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from agent import pipelines
from agent.llm import LLM
from agent.llm.native_tools import require_native_tools
from agent.nst.baselines.voice import describe_style
from agent.nst.best_of.runner import best_of, drafts_wanted, pending_drafts
from agent.nst.chapter.loop import ChapterLoop, ChapterResult
from agent.nst.chapter.rederive import rederive_nst
from agent.nst.chapter.restarts import degraded_reason, with_restarts
from agent.nst.chapter.sizing import initial_ratio, run_budget
from agent.nst.chapter.tools import TOOLS
from agent.nst.config import NstConfig
from agent.nst.plan.frozen import PLANNING_WORDS, frozen_plan, stop_after_plan
from agent.nst.state import NarrativeState
from agent.run_context import EventSink, RunContext
from agent.settings import STORY_WORDS
from agent.store import RunInfo, RunStore
from agent.store.snapshots import ChapterSnapshot
from agent.store.writer.review import owed_review, pause_after


def write(ctx: RunContext[NstConfig]) -> None:
    """Continue the run from ``store.next_unit()`` to the last chapter of the plan."""
    store, config = ctx.store, ctx.config
    check_tool_protocol(ctx)
    budget = run_budget(ctx)
    plan = frozen_plan(ctx, budget)
    outline = plan.chapters
    store.set_target(len(outline))
    if stop_after_plan(ctx, outline):
        return
    describe_style(ctx, budget)
    last = store.info().last_unit
    wanted = drafts_wanted(store)
    if wanted > 1 and last > 0 and pending_drafts(store, last):  # interrupted between a commit and its drafts
        with ctx.unit(last):
            best_of(ctx, last, wanted)
    if owed_review(store):  # stopped between the last commit and its review: the writer sees it first
        ctx.emit("note", f"chapter {last} committed; in review until fabula approve")
        return
    previous = ChapterSnapshot.read(store.state(last))  # before chapter 1: a sequel's initial state, else none
    state = NarrativeState.from_json(previous.narrative)
    ratio = previous.tokens_per_word or initial_ratio(config.prompt, config.tokens_per_word)
    ctx.set_progress(words=store.words_written(), units=len(outline), target_words=config.words)
    for index in range(store.next_unit(), len(outline) + 1):
        with ctx.unit(index):
            loop = partial(
                ChapterLoop,
                ctx.llm,
                store,
                plan=plan,
                story_prompt=config.prompt,
                state=state,
                index=index,
                config=config,
                ratio=ratio,
                emit=ctx.emit,
                budget=budget,
            )
            result = with_restarts(ctx, index, config.chapter_restarts, partial(_fresh_run, loop), degraded_reason)
            if result.state is not None:
                state = result.state
            ratio = result.ratio
            snapshot = ChapterSnapshot(
                narrative=state.to_json() if config.state else None, tokens_per_word=ratio, chapter=result.stats
            )
            store.commit_chapter(
                index,
                result.title,
                result.text,
                state=snapshot.stored(),
                degraded=result.degraded,
                degraded_reason=result.reason,
            )
            ctx.set_progress(words=ctx.words + result.stats["words"])
            ctx.emit("committed", words=result.stats["words"], degraded=result.degraded)
            if wanted > 1 and best_of(ctx, index, wanted) is not None:  # another draft won: its state now
                state = (
                    NarrativeState.from_json(ChapterSnapshot.read(store.state(index)).narrative)
                    if config.state
                    else state
                )
        if pause_after(store, index):  # --review: the writer approves, revises or edits it first
            ctx.emit("note", f"chapter {index} committed; in review until fabula approve")
            return
    store.finish()


def check_tool_protocol(ctx: RunContext[NstConfig]) -> None:
    """A run whose chapter turns speak the native tool protocol stops here, in one line naming the
    fix, when its turn model's server cannot take native tools: before the plan is paid for, not at
    the first turn. What the probe found is kept with the run's server record."""
    if ctx.config.tool_protocol != "native" or ctx.plan_only:
        return
    require_native_tools(ctx.llm, role="nst_turn")
    probe = getattr(ctx.llm, "probe", None)
    if probe is not None:
        ctx.store.plans.record_server_probe(probe.as_dict())


def _fresh_run(loop: Callable[[], ChapterLoop]) -> ChapterResult:
    """One try at a chapter by a new loop: from the checkpoint, nothing of an earlier try carried over."""
    return loop().run()


def write_story(
    store: RunStore, llm: LLM, config: NstConfig | Mapping[str, Any], *, events: EventSink | None = None
) -> None:
    """:func:`write` for a caller that holds an open model (tests, benchmarks)."""
    with RunContext(store, NstConfig.coerce(config), llm=llm, events=events) as ctx:
        write(ctx)


FLAGS = (
    pipelines.Flag("--no-state", "state", "ablation: no narrative state or update"),
    pipelines.Flag("--no-lookback", "lookback", "ablation: no read, search or correct"),
    pipelines.Flag("--max-turns", "max_turns", "turn cap per chapter (default 50)", int),
)
"""``fabula write nst``'s own options, in the order of its help."""
PROGRESS = {
    **PLANNING_WORDS,
    "nst_turn": "choosing the next step",
    "nst_prose": "drafting",
    "nst_digest": "digesting older events",
}


def reconciles(info: RunInfo) -> bool:
    """A chapter run that keeps its narrative state (not ``--no-state``) is reconciled after an edit."""
    return info.unit_kind == "chapter" and info.config.get("state", True) is not False


PIPELINE = pipelines.register(
    pipelines.Pipeline(
        "nst",
        "chapter",
        write,
        version="1",
        settings=NstConfig,
        rederive=rederive_nst,
        planned=True,
        flags=FLAGS,
        tools=tuple(name for name in TOOLS if name != "finish"),
        help="NstAgent: chapters written with tools against a tracked narrative state",
        progress=PROGRESS,
        words=STORY_WORDS,
        drafts=True,
        seeded=True,
        reconciles=reconciles,
    )
)
