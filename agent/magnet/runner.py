"""The registered Magnet pipeline: run or resume a story, one committed timestep at a time.

Starting and resuming are the same call: the runner reads the last committed state and
continues from ``store.next_unit()``. A step killed in flight leaves nothing but its ledger
rows (paid calls are never lost) and is run again from the committed state.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from agent import pipelines
from agent.llm import LLM, CallRecord
from agent.magnet import ending
from agent.magnet.definition import StoryDefinition
from agent.magnet.loop import StepOutcome, initial_state, run_step
from agent.magnet.settings import MagnetSettings
from agent.store import RunStore

NAME = "magnet"
VERSION = "1"

Reporter = Callable[[str], None]


def stderr_reporter(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class TokenMeter:
    """A recorder that totals this process's calls and tokens (for the live progress line)."""

    def __init__(self) -> None:
        self.calls = self.prompt = self.cached = self.completion = 0

    def __call__(self, record: CallRecord) -> None:
        self.calls += 1
        self.prompt += record.prompt_tokens
        self.cached += record.cached_prompt_tokens
        self.completion += record.completion_tokens


def write_story(store: RunStore, llm: LLM, config: dict[str, Any], *, report: Reporter | None = None,
                max_new_steps: int | None = None) -> None:
    """Continue the story from the last committed step until the ending rules stop it
    (or, with ``max_new_steps``, after that many steps: the run is then left resumable)."""
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
        state = store.state() or initial_state(story, settings)
        bound = ending.max_steps(story, settings)
        step = store.next_unit()
        last_allowed = step + max_new_steps - 1 if max_new_steps is not None else None
        if step > 1:
            report(f"resuming at step {step} ({state['words']}/{story.target_words} words)")
        while not state["finished"]:
            if last_allowed is not None and step > last_allowed:
                report(f"paused after step {step - 1} (fabula resume continues)")
                return
            if step > bound:
                store.put_plan("bound_hit", {"max_steps": bound, "words": state["words"]})
                report(f"stopped: the step bound ({bound}) was reached at {state['words']} words")
                break
            started = time.perf_counter()
            recent = [p.text for p in store.paragraphs()[-settings.history_window:]]
            store.unit_in_flight = step
            outcome = run_step(llm, story, settings, state, step, recent)
            outcome.record["wall_s"] = round(time.perf_counter() - started, 3)
            store.commit_step(step, outcome.paragraphs, state=outcome.state, record=outcome.record,
                              goal=outcome.record["goal"])
            store.unit_in_flight = None
            state = outcome.state
            store.set_target(_estimate(story, state, step))
            report(progress_line(story, outcome, meter))
            step += 1
        store.finish()
        report(f"done: {state['words']} words in {step - 1} steps ({state.get('finish_reason') or 'stopped'}); "
               f"{meter.calls} calls, {meter.prompt} prompt tokens ({meter.cached} cached), "
               f"{meter.completion} completion tokens this session")
    finally:
        store.unit_in_flight = None
        llm.recorders.remove(meter)


def progress_line(story: StoryDefinition, outcome: StepOutcome, meter: TokenMeter) -> str:
    r = outcome.record
    revisions = sum(a["revisions"] for a in r["actions"])
    capped = sum(1 for a in r["actions"] if a["capped"])
    event = r["goal_event"]
    goal = event["goal"] if event else r["goal"]
    line = (f"step {r['step']:>3}  {r['words_total']}/{story.target_words} words  selected "
            f"{','.join(r['selected'])}  revisions {revisions}" + (f" ({capped} capped)" if capped else "")
            + f"  commits {len(r['commits'])}  tokens {meter.prompt}+{meter.completion}  {r['wall_s']:.1f}s")
    if event:
        line += f"\n      goal ({event['kind']}): {_short(goal)}"
    return line


def _short(text: str, n: int = 100) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _estimate(story: StoryDefinition, state: dict[str, Any], step: int) -> int:
    """Steps the finished run will likely have: done + remaining words / words per step."""
    if state["finished"]:
        return step
    per_step = max(1.0, state["words"] / step)
    return step + max(1, math.ceil((story.target_words - state["words"]) / per_step))


DEFAULTS = MagnetSettings().as_config()
PIPELINE = pipelines.register(pipelines.Pipeline(
    NAME, "step", pipelines.writer_runner(partial(write_story, report=stderr_reporter)), version=VERSION,
    defaults=DEFAULTS))
