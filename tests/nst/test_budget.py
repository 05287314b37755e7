"""Every NST-family request fits its context (issue 13 items 1-4), with the scripted author.

Each test reads what was sent from the run's ledger (``llm_calls``: prompt tokens as the
model reported them and ``max_tokens`` as asked) and what gave way from its ``budget`` rows.
"""

from __future__ import annotations

import json

import pytest

from agent import pipelines
from agent.llm import LLMError
from agent.llm.budget import Budget, ContextExceededError
from agent.llm.context import (
    CharsEstimate,
    embedded_context,
    is_length_rejection,
    resolve_context,
    server_context,
)
from agent.nst import runner
from agent.nst.baselines import direct, rollsum
from agent.nst.chapter.loop import ChapterLoop
from agent.nst.chapter.planned import Plan
from agent.nst.config import DIRECT_DEFAULTS, NST_DEFAULTS, ROLLSUM_DEFAULTS, DirectConfig, NstConfig, RollSumConfig
from agent.nst.state import NarrativeState
from agent.store import RunStore
from agent.testing.author import Author, chapter_of, chapter_text, default_policy, open_requirements, prose, update_json
from agent.testing.scripted import ScriptedLLM


def attach(store: RunStore, author: Author) -> Author:
    author.recorders.append(store.ledger.recorder)
    return author


def budget_actions(store: RunStore) -> list[str]:
    return [c.arguments["action"] for c in store.ledger.tool_calls() if c.tool == "budget"]


def assert_all_fit(store: RunStore, context: int) -> None:
    calls = store.ledger.llm_calls()
    assert calls
    over = [(c.role, c.prompt_tokens, c.max_tokens) for c in calls if c.prompt_tokens + c.max_tokens > context]
    assert not over, over


def reader_policy(request, tools):
    """A capable model: reads and searches what it can before writing, then the default path."""
    chapter = chapter_of(request)
    done = [m["content"] for m in request.messages if m["role"] == "assistant"]
    if "read" in tools and not any('"read"' in d for d in done) and chapter > 1:
        return json.dumps({"tool": "read", "chapter": chapter - 1})
    if "search" in tools and not any('"search"' in d for d in done):
        return json.dumps({"tool": "search", "query": "lantern keeper harbour"})
    if "update" in tools:
        return update_json(
            chapter, events=3, characters=2, facts=3, text=chapter_text(request), resolve=open_requirements(request)[:1]
        )
    return default_policy(request, tools)


TINY = 4096
"""With the conservative characters estimate (the scripted model has no tokenizer), a 300-word
chapter's prompt and working room need about 2.5K tokens; the real tiny model, counted with its
own tokenizer, runs under 2048 (``test_embedded.py``)."""


def test_a_multi_chapter_story_in_a_tiny_context_sends_nothing_over_it(tmp_path, config):
    config = {**config, "words": 600, "context_tokens": TINY}
    store = RunStore.create(tmp_path / "tiny", pipeline="nst", config=config)
    author = attach(store, Author(policy=reader_policy))
    with store.sessions.hold("start"):
        runner.write_story(store, author, config)
    assert store.info().status == "completed" and len(store.chapters()) == 2
    assert_all_fit(store, TINY)
    assert store.plans.all()["context"] == {
        "context_tokens": TINY,
        "source": "setting context_tokens",
        "counter": "chars-estimate",
        "exact_counts": False,
        "reserve": 64,
    }
    actions = budget_actions(store)
    assert {"page_read", "refuse_read", "trim_search"} & set(actions)  # step a: lookups sized to the room
    assert all(not c.degraded for c in store.chapters()), [(c.index, c.degraded_reason) for c in store.chapters()]


def test_without_a_budget_the_same_story_goes_over(tmp_path, config):
    """The check above is not vacuous: unbudgeted, this story's requests exceed the tiny context."""
    config = {**config, "words": 600}
    store = RunStore.create(tmp_path / "free", pipeline="nst", config=config)
    with store.sessions.hold("start"):
        runner.write_story(store, attach(store, Author(policy=reader_policy)), config)
    assert any(c.prompt_tokens + c.max_tokens > TINY for c in store.ledger.llm_calls())


def run_loop(store, config, author, *, context, state=None, index=3, plan=None, **kw):
    budget = Budget(
        context,
        CharsEstimate(),
        64,
        record=lambda action, facts: store.ledger.record_tool_call(
            turn=0, tool="budget", arguments={"action": action, **facts}
        ),
    )
    plan = plan or {
        "outline": [
            {"id": i, "title": f"Part {i}", "description": f"Part {i} happens.", "target_words": 100}
            for i in range(1, 6)
        ]
    }
    loop = ChapterLoop(
        author,
        store,
        plan=Plan.of(plan),
        story_prompt="prompt",
        state=state or NarrativeState(),
        index=index,
        config=NstConfig.coerce({**config, **kw}),
        ratio=1.3,
        budget=budget,
    )
    return loop, loop.run()


def test_a_read_is_paged_when_the_whole_chapter_does_not_fit(store, config):
    store.commit_chapter(1, "Part 1", prose(1500, seed=1), state={})
    store.commit_chapter(2, "Part 2", prose(100, seed=2), state={})
    author = Author(policy=reader_policy)
    author.recorders.append(store.ledger.recorder)
    run_loop(store, config, author, context=TINY, index=3)
    read = next(c for c in store.ledger.tool_calls() if c.tool == "read")
    assert read.ok  # chapter 2 is short: whole
    store2 = store  # now a long chapter: chapter 1 via an explicit read
    calls = iter([json.dumps({"tool": "read", "chapter": 1}), json.dumps({"tool": "read", "chapter": 1, "offset": 0})])

    def pager(request, tools):
        if "read" in tools and "write" in tools:
            try:
                return next(calls)
            except StopIteration:
                pass
        return default_policy(request, tools)

    author = Author(policy=pager)
    run_loop(store2, config, author, context=TINY, index=3)
    reads = [c for c in store.ledger.tool_calls() if c.tool == "read" and c.arguments["chapter"] == 1]
    assert reads and "To continue, read chapter 1 with offset" in reads[0].result
    page = next(c for c in store.ledger.tool_calls() if c.tool == "budget" and c.arguments["action"] == "page_read")
    assert 0 < page.arguments["end"] < page.arguments["of"]
    assert_all_fit(store, TINY)


def test_the_retained_draft_gives_way_before_the_request_is_clamped(store, config):
    plan = {"outline": [{"id": 1, "title": "P", "description": "d", "target_words": 100}]}
    probe = ChapterLoop(
        Author(),
        store,
        plan=Plan.of(plan),
        story_prompt="prompt",
        state=NarrativeState(),
        index=1,
        config=NstConfig.coerce(config),
        ratio=1.3,
        budget=Budget(10_000),
    )
    context = CharsEstimate().count(probe.messages) + 64 + 1000  # the chapter fits; not with a 400-word draft kept
    sizes = iter([400, 100])

    def small_update(request, tools):
        if "update" in tools:
            return update_json(1, events=1, characters=1, requirement=False, text=chapter_text(request))
        return default_policy(request, tools)

    author = Author(policy=small_update, length=lambda request, attempt: next(sizes))
    author.recorders.append(store.ledger.recorder)
    loop, result = run_loop(store, config, author, context=context, index=1, plan=plan)
    assert not result.degraded and result.stats["attempts"] == 2
    assert "drop_retained_draft" in budget_actions(store)
    assert any(m["content"].startswith("[rejected draft: ") for m in loop.messages)
    assert_all_fit(store, context)


def test_old_arcs_are_digested_and_the_outline_abridged_when_the_prompt_does_not_fit(store, config):
    events = {
        f"ch{c}_event_{k}": f"In chapter {c} the keeper found wreck number {k} near the reef of bones "
        "and told the harbour master, who did not believe a word of it."
        for c in range(1, 30)
        for k in range(4)
    }
    provenance = {"past_events": {key: {"chapter": int(key[2:].split("_")[0]), "quote": "q"} for key in events}}
    state = NarrativeState(past_events=events, provenance=provenance)
    outline = [
        {
            "id": i,
            "title": f"Part {i}",
            "description": "The keeper follows the bell to another wreck, "
            "meets the families of the drowned and learns more of the island's secret.",
            "target_words": 100,
        }
        for i in range(1, 41)
    ]
    author = Author()
    author.recorders.append(store.ledger.recorder)
    _loop, result = run_loop(store, config, author, context=5632, state=state, index=30, plan={"outline": outline})
    digests = result.state.digests
    assert digests and digests[0]["chapters"][0] == 1 and result.state.past_events.keys() >= events.keys()
    assert all(d["chapters"][1] <= 30 - 2 for d in digests)  # the previous chapter's events stay verbatim
    actions = budget_actions(store)
    assert actions.count("consolidate_events") - actions.count("merge_digests") == len(digests)
    prompt = next(r for r in author.requests if r.role == "nst_turn").messages[1]["content"]
    assert prompt.index("[digest of chapters 1-") < prompt.index("ch29_event_0")
    assert "ch1_event_0" not in prompt
    calls = actions.count("consolidate_events") + actions.count("merge_digests")
    assert [r.role for r in author.requests[:calls]] == ["nst_digest"] * calls
    assert "abridge_outline" in actions and '{"id": 1, "title": "Part 1"}' in prompt
    assert_all_fit(store, 5632)


def test_a_server_refusal_for_length_widens_the_reserve_and_retries():
    llm = ScriptedLLM(
        [
            LLMError(
                "endpoint x refused POST /chat/completions: HTTP 400: min_tokens must be less "
                "than or equal to max_tokens=802, got 856"
            ),
            "fine",
        ]
    )
    notes: list[str] = []
    budget = Budget(2048, CharsEstimate(), 64, record=lambda action, facts: notes.append(action))
    reply = budget.generate(
        llm,
        [{"role": "user", "content": "hi"}],
        temperature=0.0,
        max_tokens=4000,
        min_output=100,
        min_tokens=500,
        what="a test",
    )
    assert reply.text == "fine" and budget.slack > 0 and "server_refused_length" in notes
    assert [r.max_tokens for r in llm.requests] == [
        2048 - 64 - budget.count([{"role": "user", "content": "hi"}]),
        2048 - 64 - budget.slack - budget.count([{"role": "user", "content": "hi"}]),
    ]
    assert all(r.min_tokens < r.max_tokens for r in llm.requests)
    assert is_length_rejection(
        LLMError("HTTP 400: This model's maximum context length is 4096 tokens. However, you requested 5000 tokens")
    )
    assert not is_length_rejection(LLMError("HTTP 400: minLength is not supported in this schema"))
    with pytest.raises(LLMError, match="HTTP 500"):
        Budget(2048).generate(
            ScriptedLLM([LLMError("HTTP 500: boom")]),
            [{"role": "user", "content": "x"}],
            temperature=0.0,
            max_tokens=10,
            min_output=1,
            what="x",
        )


def test_a_run_that_cannot_fit_stops_with_one_line_and_resumes_with_a_larger_context(tmp_path, config):
    config = {**config, "words": 600}
    small = pipelines.get("nst").configure({**config, "context_tokens": 1024}, pipelines.LLMOptions())
    store = RunStore.create(tmp_path / "r", pipeline="nst", config=small)
    with pytest.raises(ContextExceededError) as info, store.sessions.hold("start"):
        runner.write_story(store, attach(store, Author()), small)
    message = str(info.value)
    assert "\n" not in message and "1024 tokens" in message and "fabula resume" in message
    assert store.info().status == "failed" and store.info().last_unit == 0
    assert all(c.prompt_tokens + c.max_tokens <= 1024 for c in store.ledger.llm_calls())
    big = {**small, "context_tokens": 4096}
    with store.sessions.hold("resume"):
        runner.write_story(store, attach(store, Author()), big)
    assert store.info().status == "completed"
    assert_all_fit(store, 4096)
    store.close()


def test_the_context_comes_from_the_setting_the_server_or_the_model():
    class Served:
        backend, model = "endpoint", "m"
        context_length = 4096  # what a backend states it knows (agent.llm.base.LLM.context_length)

    class Embedded:
        backend, model = "scripted", "x"
        model_context = 8192  # the model config's max_position_embeddings (LLM.model_context)

    assert server_context(Served()) == 4096 and embedded_context(Embedded()) == 8192
    info, _ = resolve_context(Embedded(), None)
    assert (info.tokens, info.source, info.exact) == (8192, "embedded model config", False)
    assert resolve_context(Embedded(), 2048)[0].tokens == 2048
    assert resolve_context(Author(), None)[0].tokens is None  # unknown: nothing is clamped


def test_the_estimate_over_counts_the_real_tokenizer():
    transformers = pytest.importorskip("transformers")
    from agent.llm.context import TemplateCounter
    from agent.weights.home import fabula_home

    path = fabula_home() / "models" / "SmolLM2-135M-Instruct"
    if not (path / "tokenizer.json").exists():
        pytest.skip("the embedded model is not converted here")
    counter = TemplateCounter(transformers.AutoTokenizer.from_pretrained(path))
    for text in (prose(800), json.dumps(json.loads(update_json(3, facts=5, text=prose(200))))):
        messages = [{"role": "system", "content": "You are a novelist."}, {"role": "user", "content": text}]
        assert CharsEstimate().count(messages) >= counter.count(messages)


def test_baselines_run_as_the_reference_code_does(tmp_path, config):
    assert ROLLSUM_DEFAULTS["chapter_attempts"] == 50 and DIRECT_DEFAULTS["attempts"] == 10
    assert DIRECT_DEFAULTS["min_tokens"] is False and NST_DEFAULTS["min_past_events"] == 0
    d_config = {**DIRECT_DEFAULTS, "prompt": config["prompt"], "words": 1000}
    store = RunStore.create(tmp_path / "d", pipeline="direct", config=d_config)
    author = Author(length=lambda request, attempt: 300)
    with store.sessions.hold("start"):
        direct.write_story(store, author, DirectConfig.coerce(d_config))
    assert len(author.requests) == 10 and store.chapters()[0].degraded
    assert all(r.min_tokens is None for r in author.requests)
    rs_config = {
        **ROLLSUM_DEFAULTS,
        **{k: config[k] for k in ("prompt", "prompt_id", "words", "plan_cache")},
        "words": 1000,
    }
    rs = RunStore.create(tmp_path / "s", pipeline="rollsum", config=rs_config)
    drafts = iter(([100] * 49 + [500]) * 2)
    author = Author(length=lambda request, attempt: next(drafts))
    with rs.sessions.hold("start"):
        rollsum.write_story(rs, author, RollSumConfig.coerce(rs_config))
    chapters = [r for r in author.requests if r.role == "rollsum_chapter"]
    assert len(chapters) == 2 * 50 and not any(c.degraded for c in rs.chapters())


def test_rejections_that_fill_the_context_end_the_chapter_degraded_not_the_run(store, config):
    plan = {"outline": [{"id": 1, "title": "P", "description": "d", "target_words": 100}]}
    probe = ChapterLoop(
        Author(),
        store,
        plan=Plan.of(plan),
        story_prompt="prompt",
        state=NarrativeState(),
        index=1,
        config=NstConfig.coerce(config),
        ratio=1.3,
        budget=Budget(10_000),
    )
    context = CharsEstimate().count(probe.messages) + 64 + 1000
    author = Author(length=lambda request, attempt: 30)  # never in the gate: the rounds pile up
    author.recorders.append(store.ledger.recorder)
    _, result = run_loop(store, config, author, context=context, index=1, plan=plan)
    assert result.degraded and "before the context was full" in result.reason
    assert "out_of_room" in budget_actions(store)
    assert_all_fit(store, context)


def test_a_reply_cut_at_the_context_edge_is_not_asked_again(tmp_path, config):
    """An update cut at a max_tokens the context imposed would be cut again: the chapter ends as out
    of room at once and its state comes from the one-event fallback, instead of the same cut
    request filling the turn cap (seen: 44 identical cut updates in a 2,048-token context)."""
    config = {**config, "words": 300, "context_tokens": 2048}
    store = RunStore.create(tmp_path / "edge", pipeline="nst", config=config)
    with store.sessions.hold("start"), pytest.raises(ContextExceededError):  # chapter 2 does not fit: by design
        runner.write_story(store, attach(store, Author(policy=reader_policy)), config)
    first = [t for t in store.ledger.tool_calls() if t.unit == 1]
    # the turn is cut once; the fallback's full update may be tried once where it just fits (the cap's
    # ask joins the user turn before it, as Gemma's template needs) and then the one event applies
    cut = [
        t
        for t in first
        if t.tool == "invalid" and "cut at max_tokens" in (t.error or "") and not t.arguments.get("fallback")
    ]
    assert len(cut) == 1, [(t.tool, t.error) for t in first]
    assert len([t for t in first if t.tool == "invalid" and t.arguments.get("fallback")]) <= 1
    assert "out_of_room" in [t.arguments.get("action") for t in first if t.tool == "budget"]
    assert any(t.tool == "update" and t.ok and t.arguments.get("fallback") for t in first)
    assert [(c.index, c.degraded) for c in store.chapters()] == [(1, False)]
    assert_all_fit(store, 2048)
