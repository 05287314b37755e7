"""The Direct baseline: the whole story in one call, accepted only within ±20% of the total.

No plan, memory or tools; a bounded number of attempts, each with the previous attempt's
length feedback, and the closest attempt kept (marked degraded) if none passes. The story is
committed as one chapter so that ``show``, ``export`` and evaluation read it like any run.
"""

from __future__ import annotations

from typing import Any

from agent import pipelines
from agent.llm import LLM
from agent.llm.types import Message
from agent.nst import progress
from agent.nst.config import DIRECT_DEFAULTS
from agent.nst.length import Gate, initial_ratio, size_tokens, update_ratio
from agent.nst.loop import clean_prose
from agent.store import RunStore
from agent.text import count_words

SYSTEM = "You are a novelist. Write in the language of the prompt."


def write_story(store: RunStore, llm: LLM, config: dict[str, Any]) -> None:
    config = {**DIRECT_DEFAULTS, **config}
    store.set_target(1)
    if store.next_unit() > 1:
        store.finish()
        return
    gate = Gate.for_target(int(config["words"]), config["gate_low"], config["gate_high"])
    ratio = initial_ratio(config["prompt"], config["tokens_per_word"])
    base: list[Message] = [{"role": "system", "content": SYSTEM},
                           {"role": "user", "content": f"# Story prompt\n{config['prompt']}\n\nWrite the complete "
                            f"story in one reply. Length: {gate.describe()}. Reply with the story only."}]
    messages = base
    best: tuple[tuple[bool, int], str, int] | None = None
    attempts = int(config["attempts"])
    for attempt in range(1, attempts + 1):
        max_tokens, min_tokens = size_tokens(gate, ratio, cap=int(config["prose_max_tokens_cap"]),
                                             use_min=bool(config["min_tokens"]))
        reply = llm.generate(messages, temperature=float(config["temperature"]), max_tokens=max_tokens,
                             min_tokens=min_tokens, role="direct_story")
        text = clean_prose(reply.text)
        words, truncated = count_words(text), reply.finish_reason == "length"
        ratio = update_ratio(ratio, reply)
        ok = gate.accepts(words, truncated)
        store.record_tool_call(turn=attempt, tool="write", arguments={"words": words, "truncated": truncated,
                                                                      "accepted": ok}, ok=ok,
                               result=None if ok else gate.feedback(words, truncated))
        progress.emit({"event": "draft", "chapter": 1, "chapters": 1, "attempts": attempt, "words": words,
                       "accepted": ok})
        if ok:
            best = ((False, 0), text, words)
            break
        rank = (truncated, gate.distance(words))
        if best is None or rank < best[0]:
            best = (rank, text, words)
        messages = [*base, {"role": "assistant", "content": text},
                    {"role": "user", "content": gate.feedback(words, truncated)}]
    assert best is not None
    degraded = best[0] != (False, 0) or not gate.accepts(best[2])
    reason = (f"no attempt passed the length gate in {attempts} attempts; kept the closest: {best[2]} words for "
              f"{gate.low}-{gate.high}") if degraded else None
    store.commit_chapter(1, "Story", best[1], state={"attempts": attempt, "words": count_words(best[1])},
                         degraded=degraded, degraded_reason=reason)
    store.finish()


PIPELINE = pipelines.register(
    pipelines.Pipeline("direct", "chapter", pipelines.writer_runner(write_story), version="1", defaults=DIRECT_DEFAULTS)
)
