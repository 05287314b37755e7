"""``fabula lint RUN`` and ``--fix`` (issue 37) through the CLI against the scripted author: the flagged passages
(and only they) are rewritten by the model, the score falls, both versions are kept, the state is re-derived."""

from __future__ import annotations

import json

import pytest

from agent.cli import main
from agent.store import RunStore
from agent.store.writer.versions import chapter_versions, word_diff
from agent.testing.author import Author, chapter_of
from agent.testing.author_server import AuthorServer

PROMPT = "A lighthouse keeper finds a bell that rings by itself."
STOCK = "Her heart pounded in her chest. Mark9 couldn't help but smile at the bell. A wave of relief washed over her. "

pytestmark = pytest.mark.usefixtures("no_model_environment")


class StockAuthor(Author):
    """Chapter 2 opens with three stock phrases of machine prose."""

    def reply(self, request):
        text, finish = super().reply(request)
        if request.role == "nst_prose" and chapter_of(request) == 2:
            text = STOCK + " ".join(text.split(" ")[len(STOCK.split()) :])
        return text, finish


@pytest.fixture
def server():
    with AuthorServer(StockAuthor(), vllm=True) as running:
        yield running


def test_lint_fix_rewrites_only_the_flagged_passages_and_the_score_falls(server, tmp_path, capsys):
    run = str(tmp_path / "run")
    assert (
        main(["write", "nst", "--prompt", PROMPT, "--words", "3000", "--endpoint", server.url, "--out", run, "--quiet"])
        == 0
    )
    capsys.readouterr()
    assert main(["lint", run, "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    flagged = {f["rule"] for f in before["chapters"][1]["flags"]}
    assert {"heart-pounded", "couldnt-help-but", "wave-of"} <= flagged
    with RunStore.open(run, readonly=True) as store:
        old = store.chapter(2).text
    assert main(["lint", run, "--fix", "--chapter", "2"]) == 0
    out = capsys.readouterr().out
    assert "chapter 2: score" in out and "version 1 kept" in out and "book: score" in out
    assert main(["lint", run, "--json"]) == 0
    after = json.loads(capsys.readouterr().out)
    assert after["chapters"][1]["score"] < before["chapters"][1]["score"]
    assert not {"heart-pounded", "couldnt-help-but", "wave-of"} & {f["rule"] for f in after["chapters"][1]["flags"]}
    with RunStore.open(run, readonly=True) as store:
        new = store.chapter(2)
        versions = [(v.number, v.reason) for v in chapter_versions(store, 2)]
        assert store.state(2)["rederived"]["version"] == 2
        assert store.chapter(1).version == 1 and store.chapter(3).version == 1
    assert versions[0] == (1, "write") and versions[1][0] == 2 and versions[1][1].startswith("lint --fix")
    # only the flagged passages changed: every change lies in the chapter's first sentences
    deleted = [" ".join(t.split()) for op, t in word_diff(old, new.text) if op == "del"]
    assert deleted and all(t in " ".join(STOCK.split()) for t in deleted)
    assert old.startswith(STOCK) and new.text.endswith(old[len(STOCK) + 40 :])  # the rest untouched


def test_lint_fix_refuses_a_file(tmp_path, capsys):
    book = tmp_path / "book.txt"
    book.write_text("Her heart pounded in her chest.\n", encoding="utf-8")
    assert main(["lint", str(book), "--fix"]) == 2
    assert "is not a run" in capsys.readouterr().err


def test_lint_avoid_names_the_books_worst_offenders_in_the_next_chapters_prompt(server, tmp_path, capsys):
    run = str(tmp_path / "run")
    assert (
        main(
            [
                "write",
                "nst",
                "--prompt",
                PROMPT,
                "--words",
                "4000",
                "--endpoint",
                server.url,
                "--out",
                run,
                "--quiet",
                "--lint-avoid",
            ]
        )
        == 0
    )
    with RunStore.open(run, readonly=True) as store:
        prompts = {
            unit: call.messages[1]["content"]
            for unit, call in zip(
                [r[0] for r in store.query("SELECT unit FROM llm_calls ORDER BY id")],
                store.ledger.llm_calls(),
                strict=True,
            )
            if call.role == "nst_turn"
        }
    assert "Avoid these phrases" not in prompts[2]  # chapter 1 is clean
    assert "Avoid these phrases and words, which this book already overuses: " in prompts[3]
    assert "her heart pounded in her chest" in prompts[3] and "a wave of relief" in prompts[3]
    assert (
        main(
            [
                "write",
                "nst",
                "--prompt",
                PROMPT,
                "--words",
                "3000",
                "--endpoint",
                server.url,
                "--out",
                str(tmp_path / "paper"),
                "--profile",
                "paper",
                "--lint-avoid",
            ]
        )
        == 2
    )
    assert "for the default profile, not paper" in capsys.readouterr().err
