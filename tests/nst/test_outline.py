"""Plan before you write (#26 item 4): ``write --plan-only``, ``fabula outline`` (print, ``--edit``,
``--file``) held to every planner rule, ``resume`` writing from the edited outline, and the book's
title and author in exports. Through the CLI, with the scripted author as the model."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from agent import pipelines
from agent.cli import main
from agent.nst.plan.form import parse_text
from agent.store import RunStore
from agent.store.export.titles import chapter_heading
from agent.testing.author import BOOK_TITLE, Author

PROMPT = "A lighthouse keeper finds a bell that rings for ships that sank a hundred years ago."


@pytest.fixture(autouse=True)
def scripted(tmp_path, monkeypatch):
    """Every run opens the scripted author; plans are cached under the test's own home."""
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    authors: list[Author] = []

    def open_author(self, store=None):
        authors.append(Author())
        return authors[-1]

    monkeypatch.setattr(pipelines.LLMOptions, "open", open_author)
    return authors


def plan_only(tmp_path, capsys, writer: str = "nst", words: int = 1000) -> str:
    out = str(tmp_path / writer)
    code = main(["write", writer, "--prompt", PROMPT, "--words", str(words), "--out", out, "--quiet", "--plan-only"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    return out


def printed_outline(capsys, run: str, *flags: str) -> str:
    assert main(["outline", run, *flags]) == 0
    return capsys.readouterr().out


def edit(tmp_path, capsys, run: str, text: str) -> tuple[int, list[str]]:
    path = tmp_path / "edited.txt"
    path.write_text(text, encoding="utf-8")
    code = main(["outline", run, "--file", str(path)])
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("writer", ["nst", "rollsum"])
def test_plan_only_stores_the_outline_and_resume_writes_the_chapters(tmp_path, capsys, writer):
    out = str(tmp_path / writer)
    code = main(["write", writer, "--prompt", PROMPT, "--words", "1000", "--out", out, "--quiet", "--plan-only"])
    printed = capsys.readouterr().out
    assert code == 0
    assert f"fabula outline {out}" in printed and f"fabula resume {out}" in printed
    with RunStore.open(out, readonly=True) as store:
        info = store.info()
        assert info.status == "stopped" and info.last_unit == 0 and info.target_units == 2
        assert store.plans.get("title") == BOOK_TITLE and len(store.plans.get("outline")) == 2
        assert not store.chapters() and {c.role for c in store.ledger.llm_calls()} == {"plan_outline"}
        assert "plan_only" not in info.config
    assert main(["resume", out]) == 0  # the same configuration: no "configuration changed"
    with RunStore.open(out, readonly=True) as store:
        assert store.info().status == "completed" and len(store.chapters()) == 2
        assert [c.role for c in store.ledger.llm_calls()].count("plan_outline") == 1  # written from the stored outline


def test_outline_prints_title_premise_and_every_chapter(tmp_path, capsys):
    run = plan_only(tmp_path, capsys, words=3000)  # 3000 words: a premise stage, three chapters
    text = printed_outline(capsys, run)
    assert f"Title: {BOOK_TITLE}\n" in text and "# Premise" in text
    for n in (1, 2, 3):
        assert f"Chapter {n}: Part {n}\nTarget: 1000 words\nThings happen in part {n}.\n" in text
    data = json.loads(printed_outline(capsys, run, "--json"))
    assert data["title"] == BOOK_TITLE and data["premise"] and data["words"] == 3000 and data["written"] == 0
    assert data["chapters"][0] == {
        "id": 1,
        "title": "Part 1",
        "target_words": 1000,
        "description": "Things happen in part 1.",
    }
    with RunStore.open(run, readonly=True) as store:
        stored = store.plans.get("outline")
    assert parse_text(text) == (BOOK_TITLE, stored)  # the printed form reads back as stored
    for form in (text, json.dumps(data)):
        code, err = edit(tmp_path, capsys, run, form)
        assert code == 0 and err == ["no change; nothing stored"]
    with RunStore.open(run, readonly=True) as store:
        assert store.plans.get("plan_edits") is None


# A 1000-word story: two chapters, an even share of 500, each target 400-600, the total 800-1200.
REFUSED = {
    "no title": (("Title: The Bell Keeper", "Title:   "), "the outline has no title"),
    "too many chapters": (
        ("Things happen in part 2.", "Things happen in part 2.\n\nChapter 3: Part 3\nTarget: 500 words\nMore."),
        "has 3 chapters; write 2",
    ),
    "too few chapters": (
        ("Chapter 2: Part 2\nTarget: 500 words\nThings happen in part 2.", ""),
        "has 1 chapters; write 2",
    ),
    "ids out of order": (("Chapter 2: Part 2", "Chapter 3: Part 2"), "chapter ids must be 1, 2"),
    "empty chapter title": (("Chapter 1: Part 1", "Chapter 1:"), "chapter 1 has an empty title or description"),
    "empty summary": (("Things happen in part 2.", "   "), "chapter 2 has an empty title or description"),
    "non-positive target": (
        ("Chapter 1: Part 1\nTarget: 500", "Chapter 1: Part 1\nTarget: 0"),
        "chapter 1 has a non-positive target",
    ),
    "total outside the gate": (
        ("Target: 500 words", "Target: 300 words"),
        "the chapter targets sum to 600 words; they must sum to between 800 and 1200",
    ),
    "chapter target outside its share": (
        ("Part 1\nTarget: 500", "Part 1\nTarget: 650", "Part 2\nTarget: 500", "Part 2\nTarget: 350"),
        "chapter 1 has a target of 650 words; each chapter's must be between 400 and 600",
    ),
    "unreadable target": (("Target: 500 words", "Target: many words"), "needs 'Target: N words'"),
    "text before the chapters": (
        ("Title: The Bell Keeper", "Title: The Bell Keeper\nstray words"),
        "expected 'Title: ...' or 'Chapter N: TITLE'",
    ),
}


@pytest.mark.parametrize("rule", sorted(REFUSED))
def test_an_edit_breaking_a_planner_rule_is_refused_in_one_line_and_nothing_is_stored(tmp_path, capsys, rule):
    run = plan_only(tmp_path, capsys)
    text = printed_outline(capsys, run)
    replacements, message = REFUSED[rule]
    for old, new in zip(replacements[::2], replacements[1::2], strict=True):
        assert old in text
        text = text.replace(old, new, -1 if rule == "total outside the gate" else 1)

    def stored():
        with RunStore.open(run, readonly=True) as store:
            return store.plans.all(), store.info().status, store.query("SELECT count(*) FROM sessions")[0][0]

    before = stored()
    code, err = edit(tmp_path, capsys, run, text)
    assert code == 2 and len(err) == 1 and err[0].startswith("fabula: error: ") and message in err[0], err
    assert stored() == before


def test_a_json_edit_is_held_to_the_same_rules(tmp_path, capsys):
    run = plan_only(tmp_path, capsys)
    data = json.loads(printed_outline(capsys, run, "--json"))
    data["chapters"][0]["target_words"], data["chapters"][1]["target_words"] = 350, 650
    code, err = edit(tmp_path, capsys, run, json.dumps(data))
    assert code == 2 and len(err) == 1 and "chapter 1 has a target of 350 words" in err[0]
    code, err = edit(tmp_path, capsys, run, "{not json")
    assert code == 2 and len(err) == 1 and "not valid JSON" in err[0]


def retitled(text: str) -> str:
    return (
        text.replace("Chapter 1: Part 1\nTarget: 500 words", "Chapter 1: The Drowned Bell\nTarget: 450 words")
        .replace("Chapter 2: Part 2\nTarget: 500 words", "Chapter 2: Part 2\nTarget: 550 words")
        .replace(f"Title: {BOOK_TITLE}", "Title: Bells Under Water")
    )


def test_an_accepted_edit_is_what_resume_writes_from(tmp_path, capsys):
    run = plan_only(tmp_path, capsys)
    old = printed_outline(capsys, run)
    code, err = edit(tmp_path, capsys, run, retitled(old))
    assert code == 0 and len(err) == 1 and "chapter(s) 1, 2 and the title changed" in err[0]
    with RunStore.open(run, readonly=True) as store:
        [record] = store.plans.get("plan_edits")
        assert record["by"] == "outline" and record["previous"]["title"] == BOOK_TITLE
        assert record["previous"]["outline"][0]["title"] == "Part 1"
    assert main(["resume", run]) == 0
    with RunStore.open(run, readonly=True) as store:
        first = next(c for c in store.ledger.llm_calls() if c.role == "nst_turn" and c.messages)
        prompt = first.messages[1]["content"]
        assert 'Write chapter 1: "The Drowned Bell"' in prompt and "target 450 words, accepted range 360-540" in prompt
        assert [c.words for c in store.chapters()] == [450, 550]  # the scripted author writes the gate's target
    assert "# Bells Under Water" not in printed_outline(capsys, run)  # printed as a title line, not a heading
    assert "Title: Bells Under Water" in printed_outline(capsys, run)


def test_rollsum_stores_the_edited_chapter_title(tmp_path, capsys):
    run = plan_only(tmp_path, capsys, writer="rollsum")
    assert edit(tmp_path, capsys, run, retitled(printed_outline(capsys, run)))[0] == 0
    assert main(["resume", run]) == 0
    with RunStore.open(run, readonly=True) as store:
        assert [(c.title, c.words) for c in store.chapters()] == [("The Drowned Bell", 450), ("Part 2", 550)]


def test_written_chapters_keep_their_entries_the_rest_may_change(tmp_path, capsys):
    run = plan_only(tmp_path, capsys)
    with RunStore.open(run) as store, store.sessions.hold("test"):
        store.commit_chapter(1, "Part 1", "Some words.", state={})
    text = printed_outline(capsys, run)
    code, err = edit(tmp_path, capsys, run, text.replace("Chapter 1: Part 1", "Chapter 1: Renamed"))
    assert code == 2 and len(err) == 1 and "chapter 1 is already written" in err[0]
    code, err = edit(tmp_path, capsys, run, text.replace("Things happen in part 2.", "The bell rings at last."))
    assert code == 0 and "chapter(s) 2 changed" in err[0]


def test_edit_in_the_editor_and_a_refused_edit_is_kept(tmp_path, capsys, monkeypatch):
    run = plan_only(tmp_path, capsys)
    script = tmp_path / "editor.py"
    script.write_text(
        "import sys, pathlib\np = pathlib.Path(sys.argv[3])\n"  # EDITOR's words, then the file
        "p.write_text(p.read_text().replace(sys.argv[1], sys.argv[2]))\n"
    )
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script} 'Part 2' 'The Bell Rings'")
    assert main(["outline", run, "--edit"]) == 0
    with RunStore.open(run, readonly=True) as store:
        assert store.plans.get("outline")[1]["title"] == "The Bell Rings"
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script} 'The Bell Rings' ''")  # an empty title: refused
    capsys.readouterr()
    assert main(["outline", run, "--edit"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "empty title" in err[0] and "your edit is kept in " in err[0]
    kept = err[0].rsplit("your edit is kept in ", 1)[1]
    assert "\nChapter 2: \nTarget: 500 words\n" in Path(kept).read_text(encoding="utf-8")
    Path(kept).unlink()


def test_outline_of_a_run_without_one(tmp_path, capsys):
    run = plan_only(tmp_path, capsys)
    with RunStore.open(run) as store:
        store.plans.delete("outline")
    assert main(["outline", run]) == 2
    assert "has no outline yet" in capsys.readouterr().err


def test_an_old_outline_without_a_title_loads_and_exports_under_the_folder_name(tmp_path, capsys):
    run = plan_only(tmp_path, capsys)
    with RunStore.open(run) as store:
        store.plans.delete("title")  # as a run planned before the planner asked for a title
    text = printed_outline(capsys, run)
    assert "\nTitle: \n" in text
    assert main(["resume", run]) == 0
    assert main(["export", run, "--format", "md"]) == 0
    assert 'title: "nst"' in capsys.readouterr().out


def test_export_uses_the_planners_title_and_records_title_and_author(tmp_path, capsys):
    run = plan_only(tmp_path, capsys)
    assert main(["resume", run]) == 0
    capsys.readouterr()
    assert main(["export", run, "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert f'title: "{BOOK_TITLE}"' in md
    assert "# Chapter 1: Part 1\n" in md and "Chapter 1: Chapter 1" not in md  # the planned title, not the model's
    epub = tmp_path / "book.epub"
    assert (
        main(["export", run, "--format", "epub", "-o", str(epub), "--title", "The Last Bell", "--author", "A. Keeper"])
        == 0
    )
    with zipfile.ZipFile(epub) as book:
        opf = next(book.read(n).decode() for n in book.namelist() if n.endswith(".opf"))
        chapter = book.read(next(n for n in book.namelist() if n.endswith("chapter_001.xhtml"))).decode()
    assert "The Last Bell" in opf and "A. Keeper" in opf and BOOK_TITLE not in opf
    assert "<h1>Chapter 1: Part 1</h1>" in chapter
    capsys.readouterr()
    assert main(["export", run, "--format", "md"]) == 0  # later exports keep them
    md = capsys.readouterr().out
    assert 'title: "The Last Bell"' in md and 'author: "A. Keeper"' in md
    with RunStore.open(run, readonly=True) as store:
        [record] = store.plans.get("plan_edits")
        assert record["by"] == "export" and record["previous"] == {"author": None, "title": BOOK_TITLE}
    assert main(["export", run, "--title", "  "]) == 2


@pytest.mark.parametrize(
    ("index", "title", "heading"),
    [
        (1, "Chapter 1", "Chapter 1"),
        (1, "chapter 1:", "Chapter 1"),
        (2, "Chapter 2: The Bell", "Chapter 2: The Bell"),
        (1, "Chapter 12", "Chapter 1: Chapter 12"),
        (3, "The Bell", "Chapter 3: The Bell"),
        (4, "  ", "Chapter 4"),
        (5, "Chapter 5 \u2014 Salt", "Chapter 5: Salt"),
    ],
)
def test_a_heading_never_says_chapter_n_twice(index, title, heading):
    assert chapter_heading(index, title) == heading


def test_an_outline_is_not_changed_while_the_run_is_written(tmp_path, capsys):
    run = plan_only(tmp_path, capsys)
    text = printed_outline(capsys, run).replace("Part 2", "Renamed")
    with RunStore.open(run) as writer, writer.sessions.hold("resume"):
        code, err = edit(tmp_path, capsys, run, text)
    assert code == 1 and len(err) == 1 and "is being written" in err[0]
    assert edit(tmp_path, capsys, run, text)[0] == 0
