"""Magnet and its single-model baseline report progress like the NstAgent family: each committed
step is an event with facts (``detail`` None), and the CLI's display words it."""

from __future__ import annotations

import io

import pytest

from agent import pipelines
from agent.cli.progress import ProgressDisplay
from agent.testing.story_llm import StoryLLM
from tests.magnet.stories import story


@pytest.mark.parametrize("name", ["magnet", "single"])
def test_committed_steps_are_facts_the_display_words(tmp_path, name):
    events = []
    pipelines.start(
        tmp_path / name,
        name,
        {"story": story(words=300).to_dict()},
        pipelines.LLMOptions(backend="scripted"),
        model=StoryLLM(),
        events=events.append,
    ).close()
    committed = [e for e in events if e.kind == "committed"]
    assert committed and all(e.detail is None and e.data["step"] == n for n, e in enumerate(committed, 1))
    out, verbose = io.StringIO(), io.StringIO()
    display = ProgressDisplay(stream=out, tty=False)
    internals = ProgressDisplay(stream=verbose, tty=False, verbose=True)
    for event in committed:
        display(event)
        internals(event)
    first = out.getvalue().splitlines()[0]
    assert first.startswith(f"step   1  {committed[0].words}/300 words")
    assert "selected " not in first and " tokens " not in first  # a writer's line: words and time
    first = verbose.getvalue().splitlines()[0]  # -v: what the step did, and its tokens
    assert ("selected " in first) == (name == "magnet") and " tokens " in first
