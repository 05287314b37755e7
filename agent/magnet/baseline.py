"""The paper's single-model baseline (Section 4.2): one model writes the story from the same
definition, with no character agents, critic, world state or goal sequencing.

A local model cannot write 10,000 words in one reply, so the baseline continues the story
one paragraph per step from the definition and the recent paragraphs (the same window and
paragraph budget Magnet's narrator gets), at the baseline temperature (0.35), and ends by
the same length rule: a closing cue for the last paragraph, a stop at the target.
"""

from __future__ import annotations

import time

from agent import pipelines
from agent.llm import LLM
from agent.magnet import describe, ending, prompts, single_prompt
from agent.magnet.prose import write_prose
from agent.magnet.settings import SingleConfig
from agent.run_context import EventSink, RunContext
from agent.store import RunStore
from agent.store.snapshots import StepState
from agent.text import count_words

NAME = "single"


def write(ctx: RunContext[SingleConfig]) -> None:
    store, config = ctx.store, ctx.config
    story = config.story
    settings = config.magnet_settings()
    if store.plans.get("title") is None:
        store.plans.put("title", story.title)
    state = store.state() or {"words": 0, "narrations": 0, "narration_words": 0, "finished": False}
    step = store.next_unit()
    bound = ending.max_steps(story, settings)
    ctx.set_progress(words=StepState.read(state).words, target_words=story.target_words)
    if config.single_prompt and not state["finished"]:
        single_prompt.write_whole(ctx, story, settings, config.single_max_tokens)
        store.finish()
        ctx.emit("note", f"done: {store.state()['words']} words in one call")
        return
    while not state["finished"] and step <= bound:
        started = time.perf_counter()
        recent = [p.text for p in store.paragraphs()[-settings.history_window :]]
        final = ending.is_final_paragraph(story, settings, state)
        cue = ending.cue(story, settings, {**state, "ending": ending.in_ending_window(story, settings, state)})
        floor, high = (
            ending.final_budget(story, settings, state)
            if final
            else (settings.paragraph_min_tokens, settings.paragraph_tokens)
        )
        low = floor if settings.paragraph_floor else None
        with ctx.unit(step):
            text, trimmed = write_prose(
                ctx.llm,
                prompts.baseline(story, recent, state["words"], cue),
                settings,
                temperature=settings.baseline_temperature,
                max_tokens=settings.ceiling(high),
                min_tokens=low,
                role="baseline",
                close_after_words=ending.close_after_words(story, settings, state) if final else None,
            )
            words = count_words(text)
            state = {
                **state,
                "words": state["words"] + words,
                "narrations": state["narrations"] + 1,
                "narration_words": state["narration_words"] + words,
            }
            state["finished"] = ending.stop_reason(story, state, final) is not None
            record = {
                "step": step,
                "final_paragraph": final,
                "paragraph_trimmed": trimmed,
                "words_total": state["words"],
                "wall_s": round(time.perf_counter() - started, 3),
            }
            store.commit_step(step, [text], state=state, record=record)
        ctx.set_progress(words=state["words"])
        ctx.emit("committed", words=words, step=step, wall_s=record["wall_s"])
        step += 1
    if not state["finished"]:
        store.plans.put("bound_hit", {"max_steps": bound, "words": state["words"]})
    store.finish()
    ctx.emit("note", f"done: {state['words']} words in {step - 1} steps")


def write_baseline(store: RunStore, llm: LLM, config: SingleConfig, *, events: EventSink | None = None) -> None:
    """:func:`write` for a caller that holds an open model (tests, benchmarks)."""
    with RunContext(store, config, llm=llm, events=events) as ctx:
        write(ctx)


PIPELINE = pipelines.register(
    pipelines.Pipeline(
        NAME,
        "step",
        write,
        version="1",
        settings=SingleConfig,
        takes="story",
        help="the single-model baseline on a Magnet story definition",
        description="One model writes the story paragraph by paragraph from the definition, without agents, critic, "
        "state or goals, to the same length.",
        story_config=describe.story_config,
        graph=describe.graph,
        progress=describe.PROGRESS,
    )
)
