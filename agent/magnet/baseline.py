"""The paper's single-model baseline (Section 4.2): one model writes the story from the same
definition, with no character agents, critic, world state or goal sequencing.

A local model cannot write 10,000 words in one reply, so the baseline continues the story
one paragraph per step from the definition and the recent paragraphs (the same window and
paragraph budget Magnet's narrator gets), at the baseline temperature (0.35), and ends by
the same length rule: a closing cue for the last paragraph, a stop at the target.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from agent import pipelines
from agent.llm import LLM
from agent.magnet import ending, prompts
from agent.magnet.definition import StoryDefinition
from agent.magnet.roles import write_prose
from agent.magnet.runner import TokenMeter, stderr_reporter
from agent.magnet.settings import MagnetSettings
from agent.store import RunStore
from agent.text import count_words

NAME = "single"


def write_baseline(store: RunStore, llm: LLM, config: dict[str, Any], *, report=None) -> None:
    story = StoryDefinition.from_dict(config["story"])
    settings = MagnetSettings.from_config(config)
    report = report or (lambda line: None)
    if store.recorder not in llm.recorders:
        llm.recorders.append(store.recorder)
    meter = TokenMeter()
    llm.recorders.append(meter)
    try:
        if store.get_plan("title") is None:
            store.put_plan("title", story.title)
        state = store.state() or {"words": 0, "narrations": 0, "narration_words": 0, "finished": False}
        step = store.next_unit()
        bound = ending.max_steps(story, settings)
        while not state["finished"] and step <= bound:
            started = time.perf_counter()
            recent = [p.text for p in store.paragraphs()[-settings.history_window:]]
            final = ending.is_final_paragraph(story, state)
            cue = ending.cue(story, {**state, "ending": story.target_words - state["words"]
                                     <= settings.ending_paragraphs * ending.paragraph_words(state)})
            low, high = (ending.final_budget(story, settings, state) if final
                         else (settings.paragraph_min_tokens, settings.paragraph_tokens))
            text, trimmed = write_prose(llm, prompts.baseline(story, recent, state["words"], cue), settings,
                                        temperature=settings.baseline_temperature, max_tokens=high,
                                        min_tokens=low, role="baseline")
            words = count_words(text)
            state = {**state, "words": state["words"] + words, "narrations": state["narrations"] + 1,
                     "narration_words": state["narration_words"] + words}
            state["finished"] = final or state["words"] >= story.target_words
            record = {"step": step, "final_paragraph": final, "paragraph_trimmed": trimmed,
                      "words_total": state["words"], "wall_s": round(time.perf_counter() - started, 3)}
            store.commit_step(step, [text], state=state, record=record)
            report(f"step {step:>3}  {state['words']}/{story.target_words} words  tokens "
                   f"{meter.prompt}+{meter.completion}  {record['wall_s']:.1f}s")
            step += 1
        if not state["finished"]:
            store.put_plan("bound_hit", {"max_steps": bound, "words": state["words"]})
        store.finish()
        report(f"done: {state['words']} words in {step - 1} steps")
    finally:
        llm.recorders.remove(meter)


BASELINE_SETTINGS = ("baseline_temperature", "paragraph_tokens", "paragraph_min_tokens", "history_window",
                     "ending_paragraphs", "max_steps_factor", "retries")
PIPELINE = pipelines.register(pipelines.Pipeline(
    NAME, "step", pipelines.writer_runner(partial(write_baseline, report=stderr_reporter)), version="1",
    defaults={k: v for k, v in MagnetSettings().as_config().items() if k in BASELINE_SETTINGS}))
