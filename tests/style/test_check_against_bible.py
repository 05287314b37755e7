"""``fabula check FILE --bible BIBLE``: the book is judged against the writer's canon as well as against
itself; the scripted judge finds a chapter that contradicts the bible only because the bible is in its
prompt (after the last chapter), and the report quotes both."""

from __future__ import annotations

import pytest

from agent import pipelines
from agent.cli import main
from tests.eval.helpers import judge_llm, schema_name
from tests.manuscript.test_check import book, chapter_holding

CANON = "Ishmael Grey, eyes: green."
BROWN = "Ishmael's eyes were brown as an oak plank."
BIBLE = "# Characters\n## Ishmael Grey\nA harpooner. Facts: eyes: green\n"


def judge_reply(request):
    story = request.messages[-1]["content"]
    if schema_name(request) != "FactualDetailReport":
        return {"contradictions": []}
    first, second = chapter_holding(story, CANON), chapter_holding(story, BROWN)
    if first is None or second is None:
        return {"contradictions": []}
    return {
        "contradictions": [
            {
                "subtype": "appearance_mismatches",
                "exact_quote": CANON,
                "quote_chapter": first,
                "contradicting_quote": BROWN,
                "contradicting_chapter": second,
                "explanation": "The bible gives Ishmael green eyes.",
            }
        ]
    }


@pytest.fixture
def judge(monkeypatch):
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda *a, **k: judge_llm(judge_reply, model="judge-s"))


def test_a_chapter_that_contradicts_the_bible_is_reported_with_both_quotes(tmp_path, judge, capsys):
    source = book(tmp_path, planted={5: BROWN})
    bible = tmp_path / "bible.md"
    bible.write_text(BIBLE, encoding="utf-8")
    assert main(["check", str(source), "--out", str(tmp_path / "plain")]) == 0
    assert "No contradiction found." in capsys.readouterr().out
    assert main(["check", str(source), "--bible", str(bible), "--out", str(tmp_path / "canon")]) == 0
    report = capsys.readouterr().out
    assert f'the story bible: "{CANON}"' in report and f'chapter 5: "{BROWN}"' in report


def test_a_bad_bible_stops_the_check_before_anything_is_imported(tmp_path, judge, capsys):
    source = book(tmp_path, planted={})
    bible = tmp_path / "bible.md"
    bible.write_text("# Characters\n## A\n# Characters\n## a\n", encoding="utf-8")
    assert main(["check", str(source), "--bible", str(bible), "--out", str(tmp_path / "run")]) == 2
    assert "appears twice" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
