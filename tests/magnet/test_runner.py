"""Whole runs through the store with scripted replies: commits, ending, ablations, resume."""

from __future__ import annotations

import json
import re

import pytest

from agent import pipelines
from agent.cli import main
from agent.llm.types import LLMError
from agent.magnet import history
from agent.magnet.runner import write_story
from agent.magnet.settings import MagnetSettings
from agent.store import RunStore
from agent.testing.story_llm import StoryLLM, character_of, default_critic
from tests.magnet.stories import story


def _config(words=400, **settings):
    return {**MagnetSettings().as_config(), **settings, "story": story(words=words).to_dict()}


def _run(tmp_path, llm, config, name="run"):
    store = RunStore.create(tmp_path / name, pipeline="magnet", config=config, unit_kind="step")
    with store.sessions.hold("start"):
        write_story(store, llm, config)
    return store


def test_run_commits_every_step_and_ends_as_a_story(tmp_path):
    llm = StoryLLM()
    store = _run(tmp_path, llm, _config(words=400))
    info = store.info()
    steps = store.steps()
    assert info.status == "completed"
    assert [s["step"] for s in steps] == list(range(1, info.last_unit + 1))
    words = sum(p.words for p in store.paragraphs())
    assert words == store.state()["words"]
    # the ending: a concluding goal with its transition in the story, then a final paragraph that stops the run
    events = [s["record"]["goal_event"] for s in steps if s["record"]["goal_event"]]
    assert [e["kind"] for e in events][:1] == ["conclude"]
    assert any(p.kind == "transition" for p in store.paragraphs())
    assert steps[-1]["record"]["final_paragraph"] is True
    assert "final paragraph of the story" in llm.by_role("narrator")[-1].messages[1]["content"]
    assert words >= 400 * 0.75
    # ledger rows for every role, filed under their steps
    roles = {c.role for c in store.ledger.llm_calls()}
    assert {"character", "critic", "narrator-select", "narrator", "goal", "transition"} <= roles
    units = {row[0] for row in store.query("SELECT DISTINCT unit FROM llm_calls")}
    assert units == set(range(1, info.last_unit + 1))
    assert info.target_units == info.last_unit


def test_stops_at_the_target_without_a_goal_generator_ending(tmp_path):
    # target 100 words, under one estimated paragraph: the first paragraph is the last, and it is
    # asked for enough tokens to reach the target
    llm = StoryLLM()
    store = _run(tmp_path, llm, _config(words=100, goal_shift=False))
    assert store.info().status == "completed" and store.info().last_unit == 1
    assert llm.by_role("narrator")[0].min_tokens >= 130
    # a longer story stops once the target is reached
    store = _run(tmp_path, StoryLLM(), _config(words=500, goal_shift=False), name="long")
    steps = store.steps()
    assert store.state()["words"] >= 500 or steps[-1]["record"]["final_paragraph"]
    assert steps[-2]["record"]["words_total"] < 500


def test_commit_history_and_graph_export(tmp_path):
    store = _run(tmp_path, StoryLLM(), _config(words=200))
    lines = history.render_text(store)
    assert lines[0].startswith("step 1  selected Ann, Bob, Cy")
    assert any("Ann.acted: (new) -> 1" in ln and "[Ann: Ann acts" in ln for ln in lines)
    graph = history.graph_json(store)
    assert {n["id"] for n in graph["nodes"]} >= {"world", "character:Ann", "variable:Ann/acted"}
    node = next(n for n in graph["nodes"] if n["id"] == "variable:Ann/acted")
    assert (node["subject"], node["attribute"], node["label"]) == ("Ann", "acted", "Ann.acted")
    assert (graph["history"][0]["subject"], graph["history"][0]["attribute"]) == ("Ann", "acted")
    assert graph["history"][0]["step"] == 1
    assert "digraph world" in history.graph_dot(graph)
    assert history.graph_svg(graph).startswith("<svg")
    out = tmp_path / "g.svg"
    assert history.main([str(store.run_dir), "--format", "svg", "-o", str(out)]) == 0
    # the world, three characters, their relations (fabula's own layout, or Graphviz's when installed)
    assert len(re.findall(r'<g (?:id="card_\d+" )?class="(?:node )?card card-', out.read_text())) == 5


def test_no_critic_moves_effects_to_the_character(tmp_path):
    def action(request, n):
        name = character_of(request)
        return {
            "action": f"{name} moves.",
            "world_updates": [{"subject": name, "attribute": "moved", "value": "true"}],
            "goal_reached": False,
        }

    llm = StoryLLM(character=action)
    store = _run(tmp_path, llm, _config(words=150, critic=False))
    assert not llm.by_role("critic")
    assert "world_updates" in llm.by_role("character")[0].constraint.json_schema["properties"]
    assert store.steps()[0]["record"]["commits"]
    assert store.steps()[0]["record"]["actions"][0]["attempts"][0]["verdict"] == "unreviewed"


def test_no_structured_state_has_no_world_anywhere(tmp_path):
    llm = StoryLLM()
    store = _run(tmp_path, llm, _config(words=150, structured_state=False))
    assert store.state()["world"] is None
    assert all(not s["record"]["commits"] for s in store.steps())
    assert all("World state" not in m["content"] for r in llm.requests for m in r.messages)
    assert "world_updates" not in llm.by_role("critic")[0].constraint.json_schema["properties"]
    assert "goal_reached" in llm.by_role("critic")[0].constraint.json_schema["properties"]


def test_no_goal_shift_keeps_the_goal(tmp_path):
    def critic(request, n):
        return {**default_critic(request, n), "goal_reached": True}

    llm = StoryLLM(critic=critic)
    store = _run(tmp_path, llm, _config(words=400, goal_shift=False, stall_steps=1, shift_every=2))
    assert not llm.by_role("goal") and not llm.by_role("transition")
    assert {s["goal"] for s in store.steps()} == {"Find the codicil."}
    assert store.info().status == "completed"


def test_resume_after_a_failure_continues_without_loss_or_duplicates(tmp_path):
    def fail(request, n):
        return LLMError("server went away") if request.role == "narrator" and n >= 3 else None

    config = _config(words=400)
    store = RunStore.create(tmp_path / "r", pipeline="magnet", config=config, unit_kind="step")
    with pytest.raises(LLMError), store.sessions.hold("start"):
        write_story(store, StoryLLM(fail=fail), config)
    assert store.info().last_unit == 2 and store.info().status == "failed"
    state_2 = store.state(2)
    with store.sessions.hold("resume"):
        write_story(store, StoryLLM(), config)
    steps = [s["step"] for s in store.steps()]
    assert steps == list(range(1, store.info().last_unit + 1)) and len(steps) > 3
    assert store.state(2) == state_2
    assert store.info().status == "completed"
    # the paid calls of the failed step 3 are kept in the ledger, under step 3
    assert store.query("SELECT count(*) FROM llm_calls WHERE unit = 3 AND error IS NOT NULL")[0][0] >= 2


def test_cli_write_and_resume(tmp_path, monkeypatch, capsys):
    scripted = {"llm": StoryLLM(fail=lambda r, n: LLMError("boom") if r.role == "narrator" and n in (4, 5) else None)}
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: scripted["llm"])
    path = tmp_path / "s.toml"
    path.write_text(
        'title = "T"\ngenre = "mystery"\ngoal = "Find it."\nwords = 300\n'
        '[[characters]]\nname = "Ann"\nrole = "r"\ndescription = "d"\npersonality = "p"\ngoals = "g"\n'
        'location = "hall"\nrelationships = { Bob = "brother" }\n'
        '[[characters]]\nname = "Bob"\nrole = "r"\ndescription = "d"\npersonality = "p"\ngoals = "g"\n'
        'location = "yard"\n'
    )
    run_dir = tmp_path / "run"
    assert (
        main(
            [
                "write",
                "magnet",
                str(path),
                "--out",
                str(run_dir),
                "--max-revisions",
                "1",
                "--setting",
                "narrator_temperature=0.5",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "boom" in err and "step   1" in err
    scripted["llm"] = StoryLLM()
    assert main(["resume", str(run_dir)]) == 0
    with RunStore.open(run_dir, readonly=True) as store:
        info = store.info()
        assert info.status == "completed" and info.config["max_revisions"] == 1
        assert info.config["narrator_temperature"] == 0.5
        assert [s["step"] for s in store.steps()] == list(range(1, info.last_unit + 1))
    assert main(["show", str(run_dir)]) == 0
    assert main(["export", str(run_dir), "--format", "md"]) == 0
    assert capsys.readouterr().out.count('\ntitle: "T') == 1  # front matter, no chapter headings


def test_cli_refuses_a_bad_definition_in_one_line(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text('title = "T"\ngenre = "g"\ngoal = "x"\nwords = -3\n')
    assert main(["write", "magnet", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"fabula: error: {path}: words: must be positive, not -3",
        f"fabula: error: {path}: characters: no characters defined (add [[characters]] tables)",
    ]
    assert main(["write", "magnet", str(path), "--setting", "bogus=1"]) == 2


def test_single_baseline(tmp_path, monkeypatch):
    llm = StoryLLM()
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: llm)
    path = tmp_path / "s.toml"
    path.write_text(
        'title = "T"\ngenre = "g"\ngoal = "x"\nwords = 300\n[[characters]]\nname = "A"\nrole = "r"\n'
        'description = "d"\npersonality = "p"\ngoals = "g"\nlocation = "l"\n'
    )
    assert main(["write", "single", "--story", str(path), "--out", str(tmp_path / "b")]) == 0
    with RunStore.open(tmp_path / "b", readonly=True) as store:
        assert store.info().pipeline == "single" and store.info().status == "completed"
        assert store.state()["words"] >= 200
    assert {r.role for r in llm.requests} == {"baseline"}
    assert "final paragraph" in llm.requests[-1].messages[1]["content"]


def test_fabula_show_history(tmp_path, capsys):
    store = _run(tmp_path, StoryLLM(), _config(words=200))
    store.close()
    assert main(["show", str(tmp_path / "run"), "--history"]) == 0
    out = capsys.readouterr().out
    assert "history   step 1  selected Ann, Bob, Cy" in out and "Ann.acted: (new) -> 1" in out


def test_fabula_export_graph(tmp_path, capsys):
    store = _run(tmp_path, StoryLLM(), _config(words=200))
    store.close()
    out = tmp_path / "world.svg"
    assert main(["export", str(tmp_path / "run"), "--graph", "svg", "-o", str(out)]) == 0
    drawn = out.read_text()  # fabula's own layout, or Graphviz's (with the same classes) when installed
    assert drawn.startswith("<svg") and len(re.findall(r'class="(?:node )?card card-character"', drawn)) == 3
    assert len(re.findall(r'class="(?:node )?card card-world"', drawn)) == 1
    assert main(["export", str(tmp_path / "run"), "--graph", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "fabula-magnet-graph"
    flat = _run(tmp_path, StoryLLM(), _config(words=150, structured_state=False), name="flat")
    flat.close()
    assert main(["export", str(tmp_path / "flat"), "--graph", "dot"]) != 0
    err = capsys.readouterr().err
    assert "has no world graph" in err and len(err.strip().splitlines()) == 1


def test_a_step_that_reaches_the_target_ends_without_a_goal_or_transition(tmp_path):
    # 300 words is over one estimated paragraph (320 tokens: 237 words), so step 1 is an ordinary
    # paragraph; it writes 310 words and the story is done: no concluding goal, no transition after the end
    llm = StoryLLM(narrator=lambda request, n: " ".join(["word"] * 310) + ".")
    store = _run(tmp_path, llm, _config(words=300))
    assert store.info().status == "completed" and store.info().last_unit == 1
    assert [p.kind for p in store.paragraphs()] == ["narration"] and store.state()["words"] == 310
    assert store.steps()[0]["record"]["final_paragraph"] is False
    assert not llm.by_role("goal") and not llm.by_role("transition")
    assert store.steps()[0]["record"]["goal_event"] is None


def test_a_story_that_fits_in_one_paragraph_closes_in_its_first(tmp_path):
    # 200 words fit in one paragraph of 320 tokens (237 words at 1.35 tokens a word), so the first
    # paragraph is the final one: every role is told, the narrator's floor is sized to the 200 words,
    # and the run stops on it (a prior of 120 words made it an ordinary paragraph that stopped
    # mid-scene at the target, or a second goal and a transition when it fell short)
    llm = StoryLLM()
    store = _run(tmp_path, llm, _config(words=200))
    assert store.info().status == "completed" and store.info().last_unit == 1
    assert store.steps()[0]["record"]["final_paragraph"] is True
    assert store.state()["finish_reason"] == "final paragraph written"
    assert not llm.by_role("goal") and not llm.by_role("transition")
    (narrator,) = llm.by_role("narrator")
    assert "final paragraph of the story" in narrator.messages[1]["content"]
    assert narrator.min_tokens == 270  # 200 words x 1.35
    assert all("final paragraph of the story" in r.messages[1]["content"] for r in llm.by_role("character"))


def test_show_history_lists_failed_calls_and_rejected_updates(tmp_path, capsys):
    def fail(request, n):
        if request.role == "character" and "Your character is Cy." in request.messages[1]["content"]:
            return LLMError("Cy's call timed out")
        return LLMError("no json") if request.role == "narrator-select" and n <= 2 else None

    def select(request, n):
        return {"selected": ["Ann", "Bob"], "rejected_updates": ["u2"]}

    store = _run(tmp_path, StoryLLM(fail=fail, narrator_select=select), _config(words=400, retries=1))
    store.close()
    assert main(["show", str(tmp_path / "run"), "--history"]) == 0
    out = capsys.readouterr().out
    assert "failed: character Cy: Cy's call timed out -> sat this step out" in out
    assert "failed: narrator-select: no json -> selection failed 2 time(s), kept the first action alone (Ann)" in out
    assert "rejected by the narrator: Bob.acted = " in out


def test_a_resumed_run_continues_from_the_state_it_stopped_at(tmp_path):
    """#23: the resume tests checked numbering and the records before the interruption, never the
    state after resuming: a resume that restarted from the initial state passed them all (13 steps
    and 489 words instead of 11 and 415, the word count restarting). Here the resumed story must
    end exactly where the uninterrupted one does, its running totals continuing, not restarting."""

    def fail(request, n):
        return LLMError("server went away") if request.role == "narrator" and n >= 3 else None

    config = _config(words=400)
    whole = _run(tmp_path, StoryLLM(), config, name="whole")
    store = RunStore.create(tmp_path / "r", pipeline="magnet", config=config, unit_kind="step")
    with pytest.raises(LLMError), store.sessions.hold("start"):
        write_story(store, StoryLLM(fail=fail), config)
    stopped_words = store.state(2)["words"]
    with store.sessions.hold("resume"):
        write_story(store, StoryLLM(), config)
    assert store.info().last_unit == whole.info().last_unit
    words = sum(p.words for p in store.paragraphs())
    assert words == sum(p.words for p in whole.paragraphs()) == store.state()["words"]
    assert store.steps()[2]["record"]["words_total"] > stopped_words  # step 3 went on from step 2's total
    world = store.state()["world"]["variables"]
    assert {k: set(v) for k, v in world.items()} == {k: set(v) for k, v in whole.state()["world"]["variables"].items()}


LOOPED = "The keeper counted the lanterns by the door again. " * 12
CLEAN = (
    "Rain fell on the old house. A gull cried over the grey harbour while the tide turned, and nobody spoke "
    "of the missing will that night."
)


@pytest.mark.parametrize("second, kept", [(CLEAN, CLEAN), (LOOPED + LOOPED, LOOPED)])
def test_the_paragraph_repetition_guard_asks_again_and_keeps_the_less_repetitive(tmp_path, second, kept):
    """#23: `_unrepeated` had no scripted test (disabled, every test passed). A looping paragraph
    is asked for once more with the repeated passage quoted; the less repetitive of the two is kept."""
    llm = StoryLLM(narrator=lambda request, n: LOOPED if n == 1 else second)
    store = _run(tmp_path, llm, _config(words=100, goal_shift=False))
    narrator = llm.by_role("narrator")
    assert len(narrator) == 2 and "REJECTED: the draft repeats itself" in narrator[1].messages[-1]["content"]
    assert narrator[1].messages[-2] == {"role": "assistant", "content": LOOPED.strip()}
    assert [p.text for p in store.paragraphs() if p.kind == "narration"] == [kept.strip()]


def test_the_repetition_guard_off_sends_one_call(tmp_path):
    llm = StoryLLM(narrator=lambda request, n: LOOPED)
    store = _run(tmp_path, llm, _config(words=100, goal_shift=False, repetition_guard=False))
    assert len(llm.by_role("narrator")) == 1 and store.paragraphs()[0].text == LOOPED.strip()
