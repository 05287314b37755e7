"""Magnet's requests fit the model's context through the budget NstAgent uses (issue 9 item 6):
scripted replies, a context small enough that long-range memory must give way, every request
counted (the run's counter: the characters estimate for a scripted model)."""

from __future__ import annotations

from collections import Counter

import pytest

from agent.llm import LLMError
from agent.llm.budget import ContextExceededError
from agent.llm.context import CharsEstimate
from agent.magnet.roles import GIVE_WAY
from agent.magnet.runner import write_story
from agent.magnet.settings import MagnetSettings
from agent.store import RunStore
from agent.testing.author import prose
from agent.testing.story_llm import StoryLLM
from tests.magnet.stories import story

RESERVE = 64
ROOMY = 1800
"""Too small for this story's full memory: recalled passages must give way, nothing more."""
TIGHT = 1100
"""Smaller still: the recap and then recent paragraphs give way too."""
RECALLED = "Earlier passages that may matter now"
RECAP = "The story so far, in brief"


def paragraph(request, n):
    """Long paragraphs that name the cast and their places, so BM25 recalls them."""
    return f"Ann searched the library and Bob paced the hall while Cy read in the study (paragraph {n}). " + prose(
        70, seed=n
    )


def recap(request, n):
    return f"Recap {n}: " + prose(40, seed=100 + n)


def run(tmp_path, context: int | None, name: str = "run") -> tuple[RunStore, StoryLLM]:
    llm = StoryLLM(narrator=paragraph, recap=recap)
    settings = MagnetSettings(
        history_window=3,
        recall_paragraphs=4,
        recall_words=200,
        recap_every=3,
        context_tokens=context,
        context_reserve=RESERVE,
    )
    config = {**settings.as_config(), "story": story(words=900).to_dict()}
    store = RunStore.create(tmp_path / name, pipeline="magnet", config=config, unit_kind="step")
    with store.sessions.hold("start"):
        write_story(store, llm, config)
    return store, llm


def sizes(llm: StoryLLM) -> list[tuple[str, int]]:
    counter = CharsEstimate()
    return [(r.role, counter.count(r.messages) + r.max_tokens) for r in llm.requests]


def actions(store: RunStore) -> list[str]:
    return [t.arguments["action"] for t in store.ledger.tool_calls() if t.tool == "budget"]


def test_without_a_budget_the_prompts_outgrow_the_context(tmp_path):
    store, llm = run(tmp_path, None)
    assert max(size for _, size in sizes(llm)) > ROOMY  # the contexts below are really too small
    assert not actions(store) and all(not s["record"]["budget"] for s in store.steps())
    store.close()


def test_every_request_fits_and_recall_gives_way_first(tmp_path):
    store, llm = run(tmp_path, ROOMY)
    over = [(role, size) for role, size in sizes(llm) if size > ROOMY - RESERVE]
    assert not over, over
    assert {r.role for r in llm.requests} >= {"character", "critic", "narrator-select", "narrator", "recap"}
    done = Counter(actions(store))
    # here dropping recalled passages is enough: the recap and the recent window stay whole
    assert done["drop_recalled_paragraph"] > 0 and not done["drop_recap"] and not done["shorten_recent_window"]
    assert store.info().status == "completed"
    records = [s["record"] for s in store.steps()]
    assert any(r["budget"] for r in records)
    for r in records:
        if r["budget"]:
            assert r["memory"]["recalled"] < r["memory"]["recalled_found"]
    later = [r for r in llm.by_role("character") if RECAP in r.messages[1]["content"]]
    assert later and all(r.messages[1]["content"].count("(paragraph ") >= 3 for r in later)  # 3 recent kept
    store.close()


def test_a_tighter_context_takes_recall_then_recap_then_recent_paragraphs(tmp_path):
    store, llm = run(tmp_path, TIGHT)
    over = [(role, size) for role, size in sizes(llm) if size > TIGHT - RESERVE]
    assert not over, over
    done = Counter(actions(store))
    assert done["drop_recalled_paragraph"] and done["drop_recap"] and done["shorten_recent_window"]
    for step in store.steps():
        gave = step["record"]["budget"]
        assert gave == sorted(gave, key=GIVE_WAY.index), gave  # never the recap before recall, etc.
        if "drop_recap" in gave or "shorten_recent_window" in gave:
            assert step["record"]["memory"]["recalled"] == 0
    # a request without the recap never still carries recalled passages
    for request in llm.requests:
        text = request.messages[-1]["content"] if request.role == "character" else request.messages[1]["content"]
        if RECAP not in text and request.role in ("character", "critic", "narrator") and RECALLED in text:
            pytest.fail(f"{request.role} kept recalled passages after the recap gave way")
    store.close()


def test_a_context_nothing_fits_stops_the_run_with_one_line(tmp_path):
    with pytest.raises(ContextExceededError, match="the context of 512 tokens is too small"):
        run(tmp_path, 512)
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        assert store.info().status == "failed" and store.info().last_unit == 0


def test_a_server_that_refuses_for_length_widens_the_reserve_and_the_retry_fits(tmp_path):
    """The run's counter under-counts (a server's real context is 150 tokens smaller than the
    count allows): a refused request is fitted again under a wider reserve (90 tokens a round
    here) and re-asked, not sent again unchanged, and the requests after it are fitted under the
    wider reserve too."""
    counter, hidden = CharsEstimate(), 150

    def server(request, n):
        if counter.count(request.messages) + request.max_tokens > ROOMY - RESERVE - hidden:  # the real limit
            return LLMError(
                "endpoint x refused POST /chat/completions: HTTP 400: This model's maximum context "
                f"length is {ROOMY - hidden} tokens"
            )
        return None

    llm = StoryLLM(narrator=paragraph, recap=recap, fail=server)
    settings = MagnetSettings(
        history_window=3,
        recall_paragraphs=4,
        recall_words=200,
        recap_every=3,
        context_tokens=ROOMY,
        context_reserve=RESERVE,
        retries=2,
    )
    config = {**settings.as_config(), "story": story(words=900).to_dict()}
    store = RunStore.create(tmp_path / "run", pipeline="magnet", config=config, unit_kind="step")
    with store.sessions.hold("start"):
        write_story(store, llm, config)
    refusals = [
        t.arguments
        for t in store.ledger.tool_calls()
        if t.tool == "budget" and t.arguments["action"] == "server_refused_length"
    ]
    assert refusals, "no request was refused: the test's server is not tight enough"
    assert store.info().status == "completed"
    failures = [f for s in store.steps() for f in s["record"]["failures"]]
    assert not failures, failures  # every refused request succeeded on a retry
    limit = ROOMY - RESERVE - hidden
    over = [i for i, r in enumerate(llm.requests) if counter.count(r.messages) + r.max_tokens > limit]
    # two rounds of refusals (90 + 90 >= 150 tokens) and never again, for the rest of the story
    assert len(refusals) == 2 and refusals[-1]["slack"] >= hidden, refusals
    assert len(llm.requests) - max(over) > 20, (over, len(llm.requests))
    store.close()
