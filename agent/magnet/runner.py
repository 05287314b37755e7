"""The registered Magnet pipeline: run or resume a story, one committed timestep at a time.

Starting and resuming are the same call: the runner reads the last committed state and
continues from ``store.next_unit()``. A step killed in flight leaves nothing but its ledger
rows (paid calls are never lost) and is run again from the committed state.
"""

from __future__ import annotations

import math
import time
from typing import Any

from agent import pipelines
from agent.llm import LLM
from agent.llm.budget import run_budget
from agent.magnet import describe, ending
from agent.magnet.definition import StoryDefinition
from agent.magnet.loop import initial_state, run_step
from agent.magnet.memory import prepare
from agent.magnet.settings import MagnetConfig
from agent.run_context import EventSink, RunContext
from agent.store import RunStore
from agent.store.snapshots import StepState

NAME = "magnet"
VERSION = "1"


def write(ctx: RunContext[MagnetConfig], *, max_new_steps: int | None = None) -> None:
    """Continue the story from the last committed step until the ending rules stop it
    (or, with ``max_new_steps``, after that many steps: the run is then left resumable)."""
    store, settings = ctx.store, ctx.config
    story = settings.story
    if store.plans.get("title") is None:
        store.plans.put("title", story.title)
    state = store.state() or initial_state(story, settings)
    budget = run_budget(ctx, settings.context_tokens, settings.context_reserve)
    bound = ending.max_steps(story, settings)
    step = store.next_unit()
    ctx.set_progress(
        words=StepState.read(state).words, units=store.info().target_units, target_words=story.target_words
    )
    last_allowed = step + max_new_steps - 1 if max_new_steps is not None else None
    if step > 1:
        ctx.emit("note", f"resuming at step {step} ({state['words']}/{story.target_words} words)")
    while not state["finished"]:
        if last_allowed is not None and step > last_allowed:
            ctx.emit("note", f"paused after step {step - 1} (fabula resume continues)")
            return
        if step > bound:
            store.plans.put("bound_hit", {"max_steps": bound, "words": state["words"]})
            ctx.emit("note", f"stopped: the step bound ({bound}) was reached at {state['words']} words")
            break
        started = time.perf_counter()
        recent = [p.text for p in store.paragraphs()[-settings.history_window :]]
        with ctx.unit(step):
            memory, state = prepare(ctx.llm, store, story, settings, state, step, budget)
            outcome = run_step(ctx.llm, story, settings, state, step, recent, memory, budget)
            outcome.record["wall_s"] = round(time.perf_counter() - started, 3)
            store.commit_step(
                step, outcome.paragraphs, state=outcome.state, record=outcome.record, goal=outcome.record["goal"]
            )
        state = outcome.state
        store.set_target(_estimate(story, state, step))
        ctx.set_progress(words=state["words"], units=store.info().target_units)
        ctx.emit("committed", words=outcome.record["words_total"], **step_facts(outcome.record))
        step += 1
    store.finish()
    ctx.emit(
        "note",
        f"done: {state['words']} words in {step - 1} steps ({state.get('finish_reason') or 'stopped'}); "
        f"{ctx.calls} calls, {ctx.prompt_tokens} prompt tokens ({ctx.cached_prompt_tokens} cached), "
        f"{ctx.completion_tokens} completion tokens this session",
    )


def write_story(
    store: RunStore,
    llm: LLM,
    config: MagnetConfig | dict[str, Any],
    *,
    events: EventSink | None = None,
    max_new_steps: int | None = None,
) -> None:
    """:func:`write` for a caller that holds an open model (tests, benchmarks)."""
    with RunContext(store, MagnetConfig.coerce(config), llm=llm, events=events) as ctx:
        write(ctx, max_new_steps=max_new_steps)


def step_facts(record: dict[str, Any]) -> dict[str, Any]:
    """What a committed timestep's progress event carries (worded by the CLI: ``agent.cli.progress``)."""
    event = record["goal_event"]
    return {
        "step": record["step"],
        "selected": list(record["selected"]),
        "revisions": sum(a["revisions"] for a in record["actions"]),
        "capped": sum(1 for a in record["actions"] if a["capped"]),
        "commits": len(record["commits"]),
        "failed_calls": len(record.get("failures") or []),
        "wall_s": record["wall_s"],
        "goal": {"kind": event["kind"], "text": event["goal"]} if event else None,
    }


def _estimate(story: StoryDefinition, state: dict[str, Any], step: int) -> int:
    """Steps the finished run will likely have: done + remaining words / words per step."""
    if state["finished"]:
        return step
    per_step = max(1.0, state["words"] / step)
    return step + max(1, math.ceil(ending.remaining(story, state) / per_step))


FLAGS = (
    pipelines.Flag("--max-revisions", "max_revisions", "critic revisions per action (default 3)", int, metavar="N"),
    pipelines.Flag(
        "--stall-steps", "stall_steps", "replace a goal not completed in N steps (default 15)", int, metavar="N"
    ),
    pipelines.Flag("--shift-every", "shift_every", "domain-shifting goal every N steps (default 40)", int, metavar="N"),
    pipelines.Flag(
        "--history-window", "history_window", "recent paragraphs each role sees (default 3)", int, metavar="N"
    ),
    pipelines.Flag(
        "--no-critic", "critic", "ablation: no critic; each character states its own world updates and goal completion"
    ),
    pipelines.Flag(
        "--no-goal-shift",
        "goal_shift",
        "ablation: no goal generator; the initial goal stays (the ending is cued to the narrator)",
    ),
    pipelines.Flag(
        "--no-structured-state", "structured_state", "ablation: no world graph; no role sees or writes state"
    ),
)
"""``fabula write magnet``'s own options, in the order of its help."""

PIPELINE = pipelines.register(
    pipelines.Pipeline(
        NAME,
        "step",
        write,
        version=VERSION,
        settings=MagnetConfig,
        takes="story",
        help="Magnet: persona agents, critic, narrator, goal sequencing",
        description="Write a story with Magnet from a story definition (TOML). Examples: agent/magnet/examples/*.toml.",
        flags=FLAGS,
        flag_group="Magnet (paper defaults; all recorded in the run)",
        story_config=describe.story_config,
        graph=describe.graph,
        history=describe.history,
        progress=describe.PROGRESS,
        model_roles=describe.MODEL_ROLES,
    )
)
