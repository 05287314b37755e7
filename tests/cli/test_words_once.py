"""``--words`` is checked in one place: the pipeline's record says the range (``Pipeline.words``)
and ``Pipeline.check_words`` refuses what is outside it, for ``fabula write`` and ``fabula batch``
alike; no command spells the range or the check itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agent import pipelines
from agent.cli import main
from agent.errors import InputError
from agent.limits import MAX_WORDS

CLI = Path(__file__).resolve().parents[2] / "agent" / "cli"


def test_no_command_checks_the_words_range_itself():
    found = [
        f"{path.name}:{node.lineno}: {node.id}"
        for path in sorted(CLI.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Name) and node.id in ("MIN_WORDS", "MAX_WORDS")
    ]
    assert not found, found


@pytest.mark.parametrize("name", pipelines.names("prompt"))
def test_every_prompt_pipeline_says_its_range_and_checks_it(name):
    described = pipelines.get(name)
    assert described.words is not None
    low, high = described.words.low, described.words.high
    assert high == MAX_WORDS and described.check_words(low) == low
    with pytest.raises(InputError, match=f"--words must be between {low} and {high}, got {low - 1}"):
        described.check_words(low - 1)


@pytest.mark.parametrize(
    "command", [["write", "nst", "--prompt", "p"], ["batch", "--pipeline", "nst", "--prompts", "x.jsonl", "-o", "b"]]
)
def test_write_and_batch_refuse_the_same_words_the_same_way(command, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([*command, "--words", "10"]) == 2
    assert "--words must be between 500 and 300000, got 10" in capsys.readouterr().err


def test_one_range_for_every_door():
    """``--words`` of write and batch, ``--set words=``, continue and sequel read one range value."""
    from agent.nst.revise import continuation
    from agent.settings import STORY_WORDS, USER_LIMITS

    assert USER_LIMITS["words"] is STORY_WORDS
    assert all(pipelines.get(name).words is STORY_WORDS for name in pipelines.names("prompt"))
    assert continuation.STORY_WORDS is STORY_WORDS
