"""The recall benchmark's measure (``scripts/bench_recall.py``): a need counts as recalled only when
its needle is in the writer's prompt, and it is attributed to the section that holds it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from scripts.bench_recall import run_one
from scripts.recall_facts import script
from scripts.recall_measure import message_sections, tally


class WordTokenizer:
    """A stand-in tokenizer: one token per word or punctuation mark, four per message."""

    def apply_chat_template(
        self, messages: list[dict[str, str]], add_generation_prompt: bool = True, tokenize: bool = True, **_: Any
    ) -> list[int]:
        n = sum(4 + len(re.findall(r"\w+|[^\w\s]", m["content"])) for m in messages) + 2
        return list(range(n))


def chapter_prompt(state: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are a novelist."},
        {
            "role": "user",
            "content": f"# Story prompt\nA bell.\n\n# Outline (4 chapters, frozen)\n{{}}\n\n"
            f"# Narrative state\n{state}\n\n# Progress\nCompleted chapters: 1 of 4.",
        },
    ]


def test_a_need_counts_only_where_its_needle_is_and_is_attributed_to_that_section() -> None:
    eyes, debt, promise = script(4)  # planted in chapters 1, 2, 3; needed in 2 and 4, in 3, in 4
    assert (eyes.needed, debt.needed, promise.needed) == ((2, 4), (3,), (4,))
    search = [
        {"role": "assistant", "content": json.dumps({"tool": "search", "query": eyes.query})},
        {"role": "user", "content": f"1 passage(s) for 'eyes':\n[chapter 1] {eyes.statement}"},
    ]
    prompts = {
        2: message_sections(chapter_prompt(f"Characters:\n{json.dumps({'facts': {'eyes': eyes.needle}})}")),
        3: message_sections(chapter_prompt(f"Past events:\n[digest of chapters 1-2] {debt.statement}\n(none)")),
        # chapter 4 has the eye colour only in a search result (split over lines), the promise nowhere
        4: message_sections(chapter_prompt(f"Open: {promise.needle[:5]}") + search),
    }
    prompts[4][-1] = ("search", prompts[4][-1][1].replace(eyes.needle, eyes.needle.replace(" ", "\n  ", 1)))
    # a search of chapter 4 had found the promise, and the budget removed it before the draft
    counted = tally(script(4), prompts, {4: f"1 passage(s) for 'vow': {promise.statement}"})
    assert (counted.needed, counted.recalled, counted.unwritten, counted.dropped) == (4, 3, 0, 1)
    assert counted.by_source == {"state": 1, "digest": 1, "search": 1}
    assert counted.by_kind == {"eyes": [2, 2], "debt": [1, 1], "promise": [0, 1]}
    del prompts[4]  # a chapter never written: its needs are needed, not recalled
    counted = tally(script(4), prompts)
    assert (counted.needed, counted.recalled, counted.unwritten) == (4, 2, 2)


def run(tmp_path: Path, method: str, **settings: Any) -> dict[str, Any]:
    return run_one(method, 4000, 16384, WordTokenizer(), "words", 1000, 0.0, tmp_path, settings=settings)


def test_the_real_loops_carry_the_planted_facts_to_the_chapters_that_need_them(tmp_path: Path) -> None:
    nst = run(tmp_path, "nst")
    assert (nst["needed"], nst["recalled"], nst["by_source"], nst["status"]) == (4, 4, {"state": 4}, "completed")
    assert run(tmp_path, "rollsum")["by_source"] == {"summary": 4}
    assert run(tmp_path, "direct")["by_source"] == {"own_text": 4}
    # without the state, the author's searches are what brings the facts back
    assert run(tmp_path, "nst", state=False)["by_source"] == {"search": 4}
    blind = run(tmp_path, "nst", state=False, lookback=False)
    assert (blind["needed"], blind["recalled"], blind["by_source"]) == (4, 0, {})


def test_the_author_stops_asking_for_a_lookup_the_budget_refused() -> None:
    from agent.llm.base import Request
    from scripts.recall_author import RecallAuthor

    refused = "ERROR: there is no room in the context for a read now; continue with the chapter"
    request = Request(
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "# Current task\nWrite chapter 3"},
            {"role": "assistant", "content": json.dumps({"tool": "read", "chapter": 1, "offset": 0})},
            {"role": "user", "content": f"{refused}\n\nAvailable now: read, search, write."},
        ]
    )
    assert RecallAuthor.refused_for_room(request) == {"read"}
