"""``fabula revise RUN --step N --note ...`` on a Magnet run (issue 37): one paragraph rewritten from the note by
the run's model, the old text kept as a version, later steps marked stale."""

from __future__ import annotations

import pytest

from agent import pipelines
from agent.cli import main
from agent.llm.base import Request
from agent.store import RunStore
from agent.store.lineage.fork import STALE_KEY
from agent.testing.scripted import ScriptedLLM, per_word

NOTE = "Ann hears the clock stop"


def follow_the_note(request: Request) -> str:
    """Follows a note detectably: the note, then the paragraph as written."""
    asked = request.messages[-1]["content"]
    note = asked.split("# The writer's note\n", 1)[1].split("\n\n", 1)[0]
    old = asked.split("# The paragraph as written\n", 1)[1].split("\n\n# The writer's note", 1)[0]
    return f"{note}. {old}"


@pytest.mark.parametrize(("profile", "reasoning"), [("default", 0), ("paper", 32768)])
def test_revise_a_magnet_step_paragraph_from_a_note(tmp_path, monkeypatch, capsys, profile, reasoning):
    from agent.magnet import runner
    from agent.magnet.settings import MagnetSettings
    from agent.testing.story_llm import StoryLLM
    from tests.magnet.stories import story

    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: StoryLLM())
    settings = MagnetSettings.parse(MagnetSettings.profile_settings(profile))
    config = {**settings.as_config(), "story": story(words=400).to_dict()}
    run_dir = tmp_path / "m"
    pipelines.start(run_dir, runner.NAME, config, pipelines.LLMOptions(backend="scripted")).close()
    with RunStore.open(run_dir, readonly=True) as store:
        old = next(p for p in store.paragraphs() if p.step == 2)
    follower = ScriptedLLM(follow_the_note, model="note-follower", usage=per_word(10))
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: follower)
    capsys.readouterr()
    assert main(["revise", str(run_dir), "--step", "2", "--note", NOTE]) == 0
    out = capsys.readouterr().out
    with RunStore.open(run_dir, readonly=True) as store:
        new = next(p for p in store.paragraphs() if p.step == 2)
        assert new.text == f"{NOTE}. {old.text}"
        assert store.paragraph_versions(2, old.seq)[0]["text"] == old.text
        assert store.plans.get(STALE_KEY)["unit"] == 2
    assert "{+" + NOTE + ".+}" in out and old.text in follower.requests[0].messages[-1]["content"]
    # the rewrite is asked at a paragraph's size (or twice the old one's words), plus room to reason under paper
    assert follower.requests[0].max_tokens == max(320, 2 * len(old.text.split())) + reasoning
    assert main(["revise", str(run_dir), "--step", "2", "--paragraph", "9", "--note", NOTE]) == 2
    assert main(["revise", str(run_dir), "--chapter", "2", "--note", NOTE]) == 2
