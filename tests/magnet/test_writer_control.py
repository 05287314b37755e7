"""Writer control (point of view, tense, style, beats, ending, chapters) reaching the prompts,
the step records and the export; editorial sections that compare across the Magnet family."""

from __future__ import annotations

import math
from itertools import pairwise

from agent.eval.story import SECTION_PARAGRAPHS, load_story
from agent.magnet.baseline import write_baseline
from agent.magnet.runner import write_story
from agent.magnet.settings import MagnetSettings, SingleConfig
from agent.store import RunStore
from agent.store.export.markdown import export
from agent.testing.story_llm import StoryLLM, default_critic
from tests.magnet.stories import story


def _run(tmp_path, llm, words=600, name="run", **over):
    config = {**MagnetSettings().as_config(), "story": story(words=words, **over).to_dict()}
    store = RunStore.create(tmp_path / name, pipeline="magnet", config=config, unit_kind="step")
    with store.sessions.hold("start"):
        write_story(store, llm, config)
    return store


def _reached(request, n):
    return {**default_critic(request, n), "goal_reached": True}


def test_pov_tense_and_style_reach_every_prose_prompt(tmp_path):
    llm = StoryLLM(critic=_reached)
    _run(tmp_path, llm, pov="first", focal="Ann", tense="present", style="clipped, salt-stung sentences")
    for role in ("narrator", "transition"):
        system = "\n\n".join(m["content"] for m in llm.by_role(role)[0].messages)  # the narrator's: in the user turn
        assert "present tense" in system and "first person, narrated by Ann" in system
        assert "clipped, salt-stung sentences" in system and "past tense" not in system
    llm = StoryLLM()
    _run(tmp_path, llm, name="limited", pov="third-limited", focal="Bob")
    assert "third person limited to Bob" in llm.by_role("narrator")[0].messages[1]["content"]


def test_beats_are_passed_through_in_order_and_the_ending_is_aimed_at(tmp_path):
    llm = StoryLLM(critic=_reached)
    store = _run(tmp_path, llm, words=1200, beats=["the will is found", "Bob confesses"], ending="Ann keeps the house.")
    goals = [r.messages[1]["content"] for r in llm.by_role("goal")]
    assert "plot point, which the new goal must lead to: the will is found" in goals[0]
    assert "plot point, which the new goal must lead to: Bob confesses" in goals[1]
    assert all("plot point" not in g for g in goals[2:])
    conclude = [g for g in goals if "concluding goal" in g]
    assert conclude and "The intended ending: Ann keeps the house." in conclude[0]
    assert [g.get("beat") for g in store.state()["goals"][1:3]] == ["the will is found", "Bob confesses"]


def test_chapters_every_n_steps_and_at_goal_changes_with_headings_in_the_export(tmp_path):
    store = _run(tmp_path, StoryLLM(), chapter_every=2)
    chapters = [s["record"]["chapter"] for s in store.steps()]
    assert chapters == [(i - 1) // 2 + 1 for i in range(1, len(chapters) + 1)] and chapters[-1] >= 2
    md = export(store, "md")
    assert "# Chapter 1\n" in md and "# Chapter 2\n" in md
    store = _run(tmp_path, StoryLLM(critic=_reached), name="goal", chapter_every="goal")
    steps = store.steps()
    for before, after in pairwise(steps):
        event = before["record"]["goal_event"]
        changed = bool(event) and event["kind"] in ("complete", "stalled", "shift", "conclude")
        assert after["record"]["chapter"] == before["record"]["chapter"] + (1 if changed else 0)
    # no chapters asked for: one body, no headings
    assert "# Chapter" not in export(_run(tmp_path, StoryLLM(), name="plain"), "md")


def test_editorial_sections_are_fixed_spans_without_goal_text(tmp_path):
    magnet = _run(tmp_path, StoryLLM(critic=_reached), words=1500)
    config = SingleConfig.parse({"story": story(words=1500).to_dict()})
    single = RunStore.create(tmp_path / "single", pipeline="single", config=config.stored(), unit_kind="step")
    with single.sessions.hold("start"):
        write_baseline(single, StoryLLM(), config)
    for store in (magnet, single):
        judged = load_story(store)
        paragraphs = store.paragraphs()
        assert len(judged.sections) == math.ceil(len(paragraphs) / SECTION_PARAGRAPHS) >= 2
        assert [s.title for s in judged.sections] == [f"Section {i}" for i in range(1, len(judged.sections) + 1)]
        assert all(len(s.text.split("\n\n")) == SECTION_PARAGRAPHS for s in judged.sections[:-1])
    goals = {g["goal"] for g in magnet.state()["goals"]}
    assert not any(g in s.title for g in goals for s in load_story(magnet).sections)
