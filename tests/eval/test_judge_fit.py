"""Judges obey the context like every other request: each judge request's ``max_tokens`` is fitted
to the judge's context with the pipelines' budget, and a story too long for one call is refused
in one line before anything is sent (the protocol needs the whole story as evidence)."""

from __future__ import annotations

import pytest

from agent.cli import main
from agent.eval.consistency import judge_consistency
from agent.eval.judge import JUDGE_RESERVE, Judge, JudgeContextError
from agent.eval.quality import judge_quality
from agent.eval.story import load_story
from agent.llm.context import CharsEstimate
from agent.store import RunStore
from agent.store import judgments as stored
from tests.eval.helpers import judge_llm, make_run, words
from tests.repro.helpers import judge_fn

CONTEXT = 4096


def test_every_judge_request_is_fitted_to_the_judges_context(tmp_path):
    run = make_run(tmp_path, "r", [words(300), words(300)])
    llm = judge_llm(judge_fn(), context=CONTEXT)
    judge = Judge(llm, "small", max_tokens=8192)
    with RunStore.open(run) as store:
        story = load_story(store)
        _, counts = judge_consistency(store, story, judge)
        assert counts["ok"] == 5
        judge_quality(store, story, judge, tmp_path / "criteria")
    assert len(llm.requests) == 5 + 5 + 5  # consistency, criteria, scores
    count = CharsEstimate().count  # the scripted judge has no tokenizer: the budget's estimate
    for request in llm.requests:
        prompt = count(request.messages)
        assert request.max_tokens < 8192 and prompt + request.max_tokens == CONTEXT - JUDGE_RESERVE, (
            request.role,
            prompt,
            request.max_tokens,
        )


def test_a_judge_with_room_keeps_its_max_tokens_and_one_without_a_context_is_not_clamped(tmp_path):
    run = make_run(tmp_path, "r", [words(100)])
    for context, expected in ((100_000, 2000), (None, 2000)):
        llm = judge_llm(judge_fn(), context=context)
        with RunStore.open(run) as store:
            judge_consistency(store, load_story(store), Judge(llm, f"j{context}", max_tokens=2000))
        assert {r.max_tokens for r in llm.requests} == {expected}


def test_a_story_too_long_for_one_call_is_refused_before_anything_is_sent(tmp_path):
    run = make_run(tmp_path, "long", [words(2000), words(2000)])
    llm = judge_llm(judge_fn(), context=CONTEXT)
    with (
        RunStore.open(run) as store,
        pytest.raises(
            JudgeContextError,
            match="do not fit the judge's context "
            r"\(4096 tokens\)",
        ),
    ):
        judge_consistency(store, load_story(store), Judge(llm, "small"))
    assert llm.requests == []
    with RunStore.open(run, readonly=True) as store:
        assert stored.select(store, "consistency") == []  # nothing recorded as failed or as zero errors


def test_eval_consistency_refuses_a_story_longer_than_the_judges_context_in_one_line(tmp_path, monkeypatch, capsys):
    from agent import pipelines

    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda *a, **k: judge_llm(judge_fn(), context=None))
    long = make_run(tmp_path, "long", [words(2000), words(2000)])
    short = make_run(tmp_path, "short", [words(200)])
    assert main(["eval", "consistency", str(long), "--judge-context-tokens", str(CONTEXT)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "do not fit the judge's context (4096 tokens)" in err[0], err
    assert main(["eval", "consistency", str(short), "--judge-context-tokens", str(CONTEXT)]) == 0
    assert "5 judged, 0 failed" in capsys.readouterr().out
