"""A private consistency check of a manuscript (issue 24, item 3), with a scripted judge opened through
the CLI's own judge resolution: ``fabula eval consistency`` on an imported run finds a planted
contradiction and the view links its quotes to the passages; ``fabula check FILE`` imports, judges
and reports in one command, and a second check of the same file asks nothing again."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from agent import pipelines
from agent.cli import main
from agent.store import RunStore
from agent.testing.author import prose
from agent.testing.scripted import ScriptedLLM
from agent.view.app import create_app
from tests.eval.helpers import judge_llm, schema_name

GREEN = "Ishmael's eyes were green as the winter sea."
BROWN = "Ishmael's eyes were brown as an oak plank."
CHAPTERS = 8
PLANTED = {2: GREEN, 7: BROWN}


def book(tmp_path, name: str = "book.md", planted: dict[int, str] | None = None):
    parts = []
    planted = PLANTED if planted is None else planted
    for i in range(1, CHAPTERS + 1):
        text = prose(120, seed=i)
        if i in planted:
            text = text.replace("\n\n", f"\n\n{planted[i]} ", 1)
        parts.append(f"# Chapter {i}\n\n{text}\n")
    source = tmp_path / name
    source.write_text("\n".join(parts), encoding="utf-8")
    return source


def chapter_holding(story: str, quote: str) -> int | None:
    """The ``[Chapter N: ...]`` header the quote stands under in the judge's prompt."""
    at = story.find(quote)
    if at < 0:
        return None
    return int(re.findall(r"\[Chapter (\d+):", story[:at])[-1])


def judge_reply(request):
    """A judge that reports the eye colours, where (and only if) both are in its prompt."""
    story = request.messages[-1]["content"]
    if schema_name(request) != "FactualDetailReport":
        return {"contradictions": []}
    first, second = chapter_holding(story, GREEN), chapter_holding(story, BROWN)
    if first is None or second is None:
        return {"contradictions": []}
    return {
        "contradictions": [
            {
                "subtype": "appearance_mismatches",
                "exact_quote": GREEN,
                "quote_chapter": first,
                "contradicting_quote": BROWN,
                "contradicting_chapter": second,
                "explanation": "Ishmael's eyes cannot be both green and brown.",
            }
        ]
    }


JUDGE_CONTEXT: int | None = None
"""The context the scripted judge states, in tokens (None: it says nothing)."""


@pytest.fixture
def judges(monkeypatch):
    """Every model the CLI opens (its judges, through choose_judge) is the scripted judge."""
    opened: list[ScriptedLLM] = []

    def open_(*args, **kw):
        opened.append(judge_llm(judge_reply, model="judge-s", context=JUDGE_CONTEXT))
        return opened[-1]

    monkeypatch.setattr(pipelines.LLMOptions, "open", open_)
    return opened


def test_eval_consistency_on_an_imported_run_finds_the_planted_contradiction_linked_in_the_view(
    tmp_path, judges, capsys
):
    run = tmp_path / "runs" / "book"
    assert main(["import", str(book(tmp_path)), "--out", str(run)]) == 0
    assert main(["eval", "consistency", str(run), "--window-chapters", str(CHAPTERS)]) == 0
    out = capsys.readouterr().out
    assert "5 judged, 0 failed" in out and "verified" in out and "(0 dropped)" in out
    with RunStore.open(run, readonly=True) as store:
        assert store.info().pipeline == "imported"
    client = TestClient(create_app(tmp_path / "runs"))
    page = client.get("/run/book/judgments")
    assert page.status_code == 200
    links = re.findall(r'<a class="quote-link" href="/run/book/story#([^"]+)"', page.text)
    assert len(links) == 2, page.text
    story = client.get("/run/book/story").text
    for anchor, quote in zip(links, (GREEN, BROWN), strict=True):
        mark = re.search(rf'<mark id="{re.escape(anchor)}"[^>]*>(.*?)</mark>', story, re.S)
        assert mark and mark.group(1).replace("&#x27;", "'") == quote
    # each mark stands in its own chapter's section of the story page
    parts = re.split(r'<article class="chapter[^"]*" id="unit-(\d+)"', story)
    where = {int(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}
    assert sorted(where) == list(range(1, CHAPTERS + 1))
    assert f'id="{links[0]}"' in where[2] and f'id="{links[1]}"' in where[7]


def test_check_imports_judges_and_reports_in_one_command(tmp_path, judges, capsys):
    source = book(tmp_path)
    assert main(["check", str(source)]) == 0
    captured = capsys.readouterr()
    run = tmp_path / "book-check"
    assert (run / "run.db").exists()
    report = captured.out
    assert f"# Consistency check of {run} ({CHAPTERS} chapters" in report
    assert "1 contradiction(s), 1 with both quotes found in the text" in report
    assert "Factual detail: appearance mismatches" in report
    assert f'chapter 2: "{GREEN}"' in report and f'chapter 7: "{BROWN}"' in report
    assert f"fabula view {run}" in report
    assert f"imported {CHAPTERS} chapters" in captured.err and "chapters 1-8 in scope" in captured.err
    asked = sum(len(j.requests) for j in judges)
    assert asked == 5
    # the same file checked again: the import and the judgments are reused, nothing is asked
    assert main(["check", str(source)]) == 0
    captured = capsys.readouterr()
    assert "already holds this file's import" in captured.err and "0 judged, 0 failed, 5 already stored" in captured.err
    assert sum(len(j.requests) for j in judges) == asked
    assert captured.out == report


def test_check_refuses_bad_input_in_one_line(tmp_path, judges, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    assert main(["check", str(empty)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (tmp_path / "empty-check").exists()
    other = tmp_path / "other.md"
    other.write_text("# One\n\n" + prose(80) + "\n", encoding="utf-8")
    assert main(["check", str(other), "--out", str(tmp_path / "taken")]) == 0
    capsys.readouterr()
    assert main(["check", str(book(tmp_path)), "--out", str(tmp_path / "taken")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already holds another run" in err[0]
    assert main(["check", str(other), "--window-chapters", "0"]) == 2


def headers(request) -> list[int]:
    return [int(n) for n in re.findall(r"\[Chapter (\d+):", request.messages[-1]["content"])]


def test_check_judges_a_long_book_in_spans_with_the_books_chapter_numbers(tmp_path, judges, capsys):
    source = book(tmp_path, planted={5: GREEN, 6: BROWN})
    assert main(["check", str(source), "--span-words", "300"]) == 0  # ~125 words a chapter: two a span
    captured = capsys.readouterr()
    spans = [ln for ln in captured.err.splitlines() if "span: chapters" in ln]
    assert [ln.rsplit("span: chapters ", 1)[1] for ln in spans] == ["1-2]", "3-4]", "5-6]", "7-8]"]
    requests = [r for j in judges for r in j.requests]
    assert len(requests) == 20 and {tuple(headers(r)) for r in requests} == {(1, 2), (3, 4), (5, 6), (7, 8)}
    assert "1 contradiction(s), 1 with both quotes found" in captured.out and "judged in spans" in captured.out
    assert f'chapter 5: "{GREEN}"' in captured.out and f'chapter 6: "{BROWN}"' in captured.out
    client = TestClient(create_app(tmp_path / "book-check"))
    links = re.findall(
        r'<a class="quote-link" href="/run/book-check/story#([^"]+)"', client.get("/run/book-check/judgments").text
    )
    story = client.get("/run/book-check/story").text
    parts = re.split(r'<article class="chapter[^"]*" id="unit-(\d+)"', story)
    where = {int(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}
    assert len(links) == 2 and f'id="{links[0]}"' in where[5] and f'id="{links[1]}"' in where[6]
    # across spans a contradiction is not found: each span is judged on its own (said in the report)
    far = book(tmp_path, "far.md")
    assert main(["check", str(far), "--span-words", "300"]) == 0
    assert "0 contradiction(s)" in capsys.readouterr().out


def test_a_book_over_the_judges_context_is_refused_by_eval_and_spanned_by_check(tmp_path, judges, monkeypatch, capsys):
    room = 64 + 256 + 1500 + 300  # for about 160 words of story
    monkeypatch.setattr("tests.manuscript.test_check.JUDGE_CONTEXT", room)
    source = book(tmp_path)
    run = tmp_path / "runs" / "book"
    assert main(["import", str(source), "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["eval", "consistency", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "do not fit the judge's context (2120 tokens)" in err[0] and "fabula check" in err[0]
    assert not any(j.requests for j in judges)  # nothing was sent
    assert main(["check", str(source)]) == 0
    captured = capsys.readouterr()
    assert "does not fit the judge's context (2120 tokens) in one call: judged in spans" in captured.err
    assert len([ln for ln in captured.err.splitlines() if "span: chapters" in ln]) == CHAPTERS


def test_a_book_of_very_short_chapters_is_chapters_not_a_contents_list(tmp_path, judges, capsys):
    """Every heading with next to nothing under it looked like a table of contents, and left nothing
    (an internal error before): a book of three short chapters is three chapters."""
    source = tmp_path / "short.md"
    source.write_text(
        "# Chapter 1\n\nMara had green eyes.\n\n# Chapter 2\n\nThe storm came.\n\n# Chapter 3\n\nMara had blue eyes.\n",
        encoding="utf-8",
    )
    assert main(["import", str(source), "--out", str(tmp_path / "short")]) == 0
    with RunStore.open(tmp_path / "short", readonly=True) as store:
        assert [c.text for c in store.chapters()] == ["Mara had green eyes.", "The storm came.", "Mara had blue eyes."]
    assert "table of contents" not in capsys.readouterr().err


def test_a_check_with_one_failed_judgment_reports_what_was_judged_and_where_the_details_are(
    tmp_path, judges, monkeypatch, capsys
):
    """Four of five judgments stored and one failed: the report says so (not 'No complete judgment'),
    names the failed category, and points at stderr and the view, not at 'the lines above'."""
    from agent.llm.types import LLMError

    planted = judge_reply

    def failing(request):
        if schema_name(request) == "TimelinePlotReport":
            return LLMError("the judge's reply was cut off")
        return planted(request)

    monkeypatch.setattr("tests.manuscript.test_check.judge_reply", failing)
    assert main(["check", str(book(tmp_path))]) == 1
    report = capsys.readouterr().out
    assert "see the lines above" not in report and "No complete judgment" not in report
    assert "4 of 5 judgments complete" in report and "Timeline and plot" in report
    assert "the judge's reply was cut off" in report  # why, in the report itself
    assert "1 contradiction(s)" in report and "Factual detail: appearance mismatches" in report
    assert "fabula view" in report and "fabula check" in report
