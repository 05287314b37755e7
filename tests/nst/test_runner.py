"""Whole runs through the store with the scripted author: commits, states, ledger, resume, baselines."""

from __future__ import annotations

import pytest

from agent.nst import runner
from agent.nst.baselines import direct, rollsum
from agent.nst.config import DIRECT_DEFAULTS, ROLLSUM_DEFAULTS, DirectConfig, RollSumConfig
from agent.store import RunStore
from agent.testing.author import Author, default_policy


def attach(store: RunStore, author: Author) -> Author:
    author.recorders.append(store.ledger.recorder)
    return author


def test_nst_story_commits_every_chapter_with_its_state(store, config):
    author = attach(store, Author())
    with store.sessions.hold("start"):
        runner.write_story(store, author, config)
    info = store.info()
    assert info.status == "completed" and info.last_unit == 2 == info.target_units
    chapters = store.chapters()
    assert [c.index for c in chapters] == [1, 2] and all(c.words == 600 for c in chapters)
    assert store.plans.all()["outline"][0]["target_words"] == 600 and store.plans.all()["source"] == "planner"
    assert len(store.state(1)["narrative"]["past_events"]) == 4
    assert len(store.state(2)["narrative"]["past_events"]) == 8
    assert store.state(2)["chapter"]["first_attempt_pass"] is True
    assert len(store.ledger.llm_calls()) == len(author.requests)
    assert {c.role for c in store.ledger.llm_calls()} >= {"plan_outline", "nst_turn", "nst_prose"}


def test_resume_after_a_crash_mid_chapter_loses_and_duplicates_nothing(tmp_path, config):
    first = RunStore.create(tmp_path / "r", pipeline="nst", config=config)

    def crashing(request, tools):
        if "Write chapter 2" in request.messages[1]["content"] and "update" in tools:
            raise RuntimeError("killed")
        return default_policy(request, tools)

    with pytest.raises(RuntimeError), first.sessions.hold("start"):
        runner.write_story(first, attach(first, Author(policy=crashing)), config)
    assert first.info().last_unit == 1
    first.close()
    again = RunStore.open(tmp_path / "r")
    author = attach(again, Author())
    with again.sessions.hold("resume"):
        runner.write_story(again, author, config)
    assert [c.index for c in again.chapters()] == [1, 2] and again.info().status == "completed"
    assert not any(r.role and r.role.startswith("plan") for r in author.requests)  # the frozen plan is reused
    # chapter 2 starts from the state stored after chapter 1
    assert "ch1_event_0" in author.requests[0].messages[1]["content"]
    assert len(again.state(2)["narrative"]["past_events"]) == 8
    again.close()


def test_degraded_chapter_is_committed_and_marked(store, config):
    author = attach(store, Author(length=lambda request, attempt: 50))
    with store.sessions.hold("start"):
        runner.write_story(store, author, {**config, "max_turns": 4})
    chapters = store.chapters()
    assert len(chapters) == 2 and all(c.degraded and "no draft passed" in c.degraded_reason for c in chapters)


def test_rollsum_reads_the_same_frozen_plan(tmp_path, config):
    nst_store = RunStore.create(tmp_path / "n", pipeline="nst", config=config)
    with nst_store.sessions.hold("start"):
        runner.write_story(nst_store, Author(), config)
    rs_config = {**ROLLSUM_DEFAULTS, **{k: config[k] for k in ("prompt", "prompt_id", "words", "plan_cache", "llm")}}
    rs_store = RunStore.create(tmp_path / "s", pipeline="rollsum", config=rs_config)
    sizes = iter([100, 600, 600])
    author = attach(rs_store, Author(length=lambda request, attempt: next(sizes)))
    with rs_store.sessions.hold("start"):
        rollsum.write_story(rs_store, author, RollSumConfig.coerce(rs_config))
    assert (
        rs_store.plans.all()["digest"] == nst_store.plans.all()["digest"] and rs_store.plans.all()["source"] == "cache"
    )
    assert [c.words for c in rs_store.chapters()] == [600, 600]
    roles = [r.role for r in author.requests]
    # no summary after the last chapter: nothing reads it (the reference's rule, rolling_summary.py:958-971)
    assert roles == ["rollsum_chapter", "rollsum_chapter", "rollsum_summary", "rollsum_chapter"]
    assert "REJECTED: 100 words" in author.requests[1].messages[-1]["content"]
    assert rs_store.state(1)["summary"] in author.requests[3].messages[1]["content"]
    assert sum(c.words for c in rs_store.chapters()) == 1200  # the summary never counts


def test_direct_bounded_attempts_and_gate(tmp_path, config):
    d_config = {**DIRECT_DEFAULTS, "prompt": config["prompt"], "words": 1000, "attempts": 3}
    store = RunStore.create(tmp_path / "d", pipeline="direct", config=d_config)
    sizes = iter([500, (1000, "length"), 700])
    author = Author(length=lambda request, attempt: next(sizes))
    with store.sessions.hold("start"):
        direct.write_story(store, author, DirectConfig.coerce(d_config))
    (chapter,) = store.chapters()
    assert chapter.degraded and chapter.words == 700 and len(author.requests) == 3
    ok_store = RunStore.create(tmp_path / "e", pipeline="direct", config=d_config)
    with ok_store.sessions.hold("start"):
        direct.write_story(ok_store, Author(length=lambda request, attempt: 1100), DirectConfig.coerce(d_config))
    assert not ok_store.chapters()[0].degraded and ok_store.info().status == "completed"
