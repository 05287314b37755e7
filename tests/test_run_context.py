"""The run context: ledger attribution by unit, progress at every model call, for both pipelines."""

from __future__ import annotations

import io

from agent import pipelines
from agent.cli.progress import ProgressDisplay
from agent.magnet import runner as magnet_runner
from agent.magnet.settings import MagnetSettings
from agent.nst import runner as nst_runner
from agent.run_context import Event, RunContext
from agent.store import RunStore
from agent.testing.author import Author
from agent.testing.story_llm import StoryLLM
from tests.magnet.stories import story


def test_unit_attribution_is_scoped(tmp_path):
    store = RunStore.create(tmp_path / "r", pipeline="nst", config={"x": 1})
    llm = Author()
    with RunContext(store, {}, llm=llm) as ctx:
        with ctx.unit(0):
            llm.generate([{"role": "user", "content": "plan"}], temperature=0, max_tokens=8, role="plan_premise")
            with ctx.unit(1):
                llm.generate([{"role": "user", "content": "a"}], temperature=0, max_tokens=8, role="plan_acts")
            llm.generate([{"role": "user", "content": "b"}], temperature=0, max_tokens=8, role="plan_synopsis")
        assert store.db.unit_in_flight is None
    units = [row[0] for row in store.query("SELECT unit FROM llm_calls ORDER BY id")]
    assert units == [0, 1, 0]
    assert store.ledger.recorder not in llm.recorders or len(llm.recorders) == 1  # the context detached itself
    store.close()


def test_every_model_call_of_an_nst_run_is_an_event_with_totals(tmp_path):
    from agent.nst.config import NST_DEFAULTS
    from tests.nst.conftest import PROMPT

    config = {
        **NST_DEFAULTS,
        "prompt": PROMPT,
        "words": 1200,
        "plan_cache": str(tmp_path / "plans"),
        "llm": {"backend": "scripted", "model": "scripted-author"},
    }
    events: list[Event] = []
    store = RunStore.create(tmp_path / "run", pipeline="nst", config=config)
    author = Author()
    nst_runner.write_story(store, author, config, events=events.append)
    calls = [e for e in events if e.kind == "call"]
    assert len(calls) == len(author.requests) == len(store.ledger.llm_calls())
    assert [e.calls for e in calls] == list(range(1, len(calls) + 1))
    assert {e.detail for e in calls} >= {"plan_outline", "nst_turn", "nst_prose"}
    chapter_calls = [e for e in calls if e.unit == 2]
    assert chapter_calls and all(e.units == 2 and e.target_words == 1200 for e in chapter_calls)
    committed = [e for e in events if e.kind == "committed"]
    assert [e.words for e in committed] == [600, 1200]
    assert committed[0].eta_s is not None and committed[-1].eta_s == 0
    store.close()


def test_magnet_steps_report_every_call(tmp_path):
    events: list[Event] = []
    config = {**MagnetSettings().as_config(), "story": story(words=200).to_dict()}
    store = RunStore.create(tmp_path / "run", pipeline="magnet", config=config, unit_kind="step")
    magnet_runner.write_story(store, StoryLLM(), config, events=events.append, max_new_steps=1)
    kinds = [e.kind for e in events]
    assert kinds.count("call") >= 4 and "committed" in kinds
    roles = {e.detail for e in events if e.kind == "call"}
    assert {"character", "narrator"} <= roles
    assert all(e.unit == 1 for e in events if e.kind == "call")
    store.close()


def test_display_on_a_terminal_and_in_a_log():
    tty, log = io.StringIO(), io.StringIO()
    live, plain = ProgressDisplay(stream=tty, tty=True, width=120), ProgressDisplay(stream=log, tty=False)
    call = Event(
        "call",
        unit=2,
        units=5,
        detail="nst_prose",
        words=1200,
        target_words=5000,
        calls=7,
        prompt_tokens=1000,
        cached_prompt_tokens=800,
        completion_tokens=300,
        elapsed_s=65,
        eta_s=200,
    )
    for display in (live, plain):
        display(call)
        display(call)  # a log gets at most one call line per interval
        display(Event("committed", unit=2, units=5, words=2400, target_words=5000, data={"words": 1200}))
    assert tty.getvalue().count("\r\033[K") == 3
    assert "chapter 2/5: drafting  1200/5000 words  ETA 3m20s  1m05s elapsed" in tty.getvalue()
    verbose = io.StringIO()
    ProgressDisplay(stream=verbose, tty=True, width=120, verbose=True)(call)  # -v: the calls and tokens too
    assert "chapter 2/5: drafting  1200/5000 words  ETA 3m20s  7 calls  1.3k tokens (80% cached)" in verbose.getvalue()
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and lines[1].startswith("chapter 2/5 written (1200 words)  2400/5000 words")


def test_start_hands_the_runner_a_typed_config_and_a_lazy_model(tmp_path, monkeypatch):
    seen = {}
    opened = []

    def run(ctx):
        seen["config"] = ctx.config
        ctx.store.set_target(1)
        ctx.store.commit_chapter(1, "t", "text", state={})
        ctx.store.finish()

    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: opened.append(1))
    pipelines.register(pipelines.Pipeline("typed-test", "chapter", run, settings=MagnetSettings))
    pipelines.start(tmp_path / "r", "typed-test", {"shift_every": 7}, pipelines.LLMOptions("scripted")).close()
    assert isinstance(seen["config"], MagnetSettings) and seen["config"].shift_every == 7
    assert not opened  # a runner that never asks for the model opens none


def test_a_shared_model_is_left_as_it_was_found(tmp_path):
    """A model that outlives the run (a server session, a test fixture) keeps no recorder of a
    closed store and no sampling policy of a finished run."""
    store = RunStore.create(tmp_path / "r", pipeline="nst", config={})
    llm = Author()
    with RunContext(store, MagnetSettings(), llm=llm):
        assert store.ledger.recorder in llm.recorders and llm.sampling_policy is not None
    store.close()
    assert llm.recorders == [] and llm.sampling_policy is None
    llm.generate([{"role": "user", "content": "plan"}], temperature=0, max_tokens=8, role="plan_premise")
