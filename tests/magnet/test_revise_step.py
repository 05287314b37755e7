"""``fabula revise RUN --step N --note ...`` on a Magnet run (issue 37): one paragraph rewritten from the note by
the run's model, the old text kept as a version, later steps marked stale."""

from __future__ import annotations

from agent import pipelines
from agent.cli import main
from agent.llm.base import LLM
from agent.llm.types import RawReply, Usage
from agent.store import RunStore
from agent.store.lineage.fork import STALE_KEY

NOTE = "Ann hears the clock stop"


class NoteFollower(LLM):
    """Follows a note detectably: the note, then the paragraph as written."""

    backend = "scripted"

    def __init__(self) -> None:
        super().__init__("note-follower")
        self.asked: list[str] = []

    def _complete(self, request):
        asked = request.messages[-1]["content"]
        self.asked.append(asked)
        note = asked.split("# The writer's note\n", 1)[1].split("\n\n", 1)[0]
        old = asked.split("# The paragraph as written\n", 1)[1].split("\n\n# The writer's note", 1)[0]
        text = f"{note}. {old}"
        return RawReply(text=text, finish_reason="stop", usage=Usage(10, 0, len(text.split())), model=self.model)


def test_revise_a_magnet_step_paragraph_from_a_note(tmp_path, monkeypatch, capsys):
    from agent.magnet import runner
    from agent.magnet.settings import MagnetSettings
    from tests.magnet.story_llm import StoryLLM, story

    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: StoryLLM())
    config = {**MagnetSettings().as_config(), "story": story(words=400).to_dict()}
    run_dir = tmp_path / "m"
    pipelines.start(run_dir, runner.NAME, config, pipelines.LLMOptions(backend="scripted")).close()
    with RunStore.open(run_dir, readonly=True) as store:
        old = next(p for p in store.paragraphs() if p.step == 2)
    follower = NoteFollower()
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: follower)
    capsys.readouterr()
    assert main(["revise", str(run_dir), "--step", "2", "--note", NOTE]) == 0
    out = capsys.readouterr().out
    with RunStore.open(run_dir, readonly=True) as store:
        new = next(p for p in store.paragraphs() if p.step == 2)
        assert new.text == f"{NOTE}. {old.text}"
        assert store.paragraph_versions(2, old.seq)[0]["text"] == old.text
        assert store.get_plan(STALE_KEY)["unit"] == 2
    assert "{+" + NOTE + ".+}" in out and old.text in follower.asked[0]
    assert main(["revise", str(run_dir), "--step", "2", "--paragraph", "9", "--note", NOTE]) == 2
    assert main(["revise", str(run_dir), "--chapter", "2", "--note", NOTE]) == 2
