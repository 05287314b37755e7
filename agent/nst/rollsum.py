"""The RollSum baseline: plain chapters from the same frozen outline, with a rolling summary.

Each chapter is one plain-text reply (no tools) conditioned on the prompt, the outline and a
story-so-far summary, under the same gate as NstAgent (with feedback, a bounded number of
attempts, the closest draft kept and marked degraded otherwise). After each accepted
chapter the model rewrites the summary from the previous summary and the new chapter. The
summary is method-internal state: it is stored with the chapter and never counts as story.
"""

from __future__ import annotations

from typing import Any

from agent import pipelines
from agent.llm import LLM
from agent.llm.types import Message
from agent.nst import progress
from agent.nst.config import ROLLSUM_DEFAULTS
from agent.nst.length import Gate, initial_ratio, size_tokens, update_ratio
from agent.nst.loop import clean_prose
from agent.nst.planning import frozen_plan
from agent.nst.prompts import outline_block
from agent.store import RunStore
from agent.text import count_words

SYSTEM = "You are a novelist writing a long story one chapter at a time. Write in the language of the prompt."


def chapter_messages(prompt: str, outline: list[dict[str, Any]], summary: str, item: dict[str, Any],
                     gate: Gate, completed: int) -> list[Message]:
    user = (f"# Story prompt\n{prompt}\n\n# Outline ({len(outline)} chapters, frozen)\n{outline_block(outline)}\n\n"
            f"# Story so far (summary)\n{summary or '(nothing written yet)'}\n\n"
            f"# Progress\nCompleted chapters: {completed} of {len(outline)}.\n\n"
            f"# Current task\nWrite chapter {item['id']}: \"{item['title']}\".\nWhat happens: {item['description']}\n"
            f"Length: {gate.describe()}.\nReply with the chapter's prose only: no title line, no notes.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def summary_messages(summary: str, index: int, text: str) -> list[Message]:
    user = (f"Summary of the story so far:\n{summary or '(empty: this is the first chapter)'}\n\n"
            f"New chapter {index}:\n{text}\n\nRewrite the summary of the story so far so that it also covers the "
            "new chapter. Keep every fact a later chapter may need: names, ages, dates, places, what each "
            "character knows and has, promises not yet kept. Reply with the summary only.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def write_story(store: RunStore, llm: LLM, config: dict[str, Any]) -> None:
    config = {**ROLLSUM_DEFAULTS, **config}
    plan = frozen_plan(store, llm, config)
    outline = plan["outline"]
    store.set_target(len(outline))
    last = store.info().last_unit
    previous = (store.state(last) if last else None) or {}
    summary = previous.get("summary", "")
    ratio = float(previous.get("tokens_per_word") or initial_ratio(config["prompt"], config["tokens_per_word"]))
    temperature = float(config["temperature"])
    for index in range(store.next_unit(), len(outline) + 1):
        item = outline[index - 1]
        gate = Gate.for_target(int(item["target_words"]), config["gate_low"], config["gate_high"])
        messages = chapter_messages(config["prompt"], outline, summary, item, gate, index - 1)
        best: tuple[tuple[bool, int], str, int] | None = None
        accepted = None
        attempts = int(config["chapter_attempts"])
        first_pass = None
        for attempt in range(1, attempts + 1):
            max_tokens, min_tokens = size_tokens(gate, ratio, cap=int(config["prose_max_tokens_cap"]),
                                                 use_min=bool(config["min_tokens"]))
            reply = llm.generate(messages, temperature=temperature, max_tokens=max_tokens, min_tokens=min_tokens,
                                 role="rollsum_chapter")
            text = clean_prose(reply.text)
            words, truncated = count_words(text), reply.finish_reason == "length"
            ratio = update_ratio(ratio, reply)
            ok = gate.accepts(words, truncated)
            first_pass = ok if first_pass is None else first_pass
            store.record_tool_call(turn=attempt, tool="write", arguments={"words": words, "truncated": truncated,
                                                                          "accepted": ok}, ok=ok,
                                   result=None if ok else gate.feedback(words, truncated))
            progress.emit({"event": "draft", "chapter": index, "chapters": len(outline), "attempts": attempt,
                           "words": words, "accepted": ok})
            if ok:
                accepted = text
                break
            rank = (truncated, gate.distance(words))
            if best is None or rank < best[0]:
                best = (rank, text, words)
            # the retry sees only the latest rejected draft and its feedback (bounded context)
            messages = [*messages[:2], {"role": "assistant", "content": text},
                        {"role": "user", "content": gate.feedback(words, truncated)}]
        degraded, reason = accepted is None, None
        if accepted is None:
            assert best is not None
            accepted = best[1]
            reason = (f"no draft passed the length gate in {attempts} attempts; kept the closest: {best[2]} words "
                      f"for {gate.low}-{gate.high}")
        reply = llm.generate(summary_messages(summary, index, accepted), temperature=temperature,
                             max_tokens=int(config["summary_max_tokens"]), role="rollsum_summary")
        summary = reply.text.strip()
        stats = {"attempts": attempt, "first_attempt_pass": first_pass, "words": count_words(accepted),
                 "target": gate.target, "degraded": degraded, "summary_words": count_words(summary)}
        store.commit_chapter(index, item["title"], accepted, state={"summary": summary, "tokens_per_word": ratio,
                                                                   "chapter": stats},
                             degraded=degraded, degraded_reason=reason)
        progress.emit({"event": "committed", "chapter": index, "chapters": len(outline), "words": stats["words"],
                       "degraded": degraded})
    store.finish()


PIPELINE = pipelines.register(
    pipelines.Pipeline("rollsum", "chapter", pipelines.writer_runner(write_story), version="1",
                       defaults=ROLLSUM_DEFAULTS)
)
