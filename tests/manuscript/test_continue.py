"""``fabula continue RUN --words N`` (issue 24, item 4) through the CLI against the scripted author
behind a vLLM-shaped server: the new chapters' outline is planned from the final state, its open
requirements and the end of the book, it is reviewable (``--plan-only``, ``fabula outline``), NstAgent
writes on with the final state in its prompt and a search over the whole book, the existing chapters
never change; bad input is one line and exit 2 with nothing written; an interrupted continue resumes."""

from __future__ import annotations

import hashlib
import json

import pytest

from agent.cli import main
from agent.store import RunStore
from agent.testing.author import Author, default_policy, prose
from agent.testing.author_server import AuthorServer

PROMPT = "A lighthouse keeper finds a bell that rings by itself."


def searching_policy(request, tools):
    """Search the book once before writing (the whole book is searchable), then the shortest path."""
    if "search" in tools and not any(
        '"tool": "search"' in m["content"] for m in request.messages if m["role"] == "assistant"
    ):
        return json.dumps({"tool": "search", "query": "Mark0 lantern keeper"})
    return default_policy(request, tools)


@pytest.fixture
def server():
    with AuthorServer(Author(policy=searching_policy), vllm=True) as running:
        yield running


pytestmark = pytest.mark.usefixtures("no_model_environment")


def written_book(server: AuthorServer, out) -> str:
    assert (
        main(
            [
                "write",
                "nst",
                "--prompt",
                PROMPT,
                "--words",
                "1000",
                "--endpoint",
                server.url,
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    return str(out)


def fingerprints(run: str) -> dict[int, tuple[str, int]]:
    """Each chapter's text hash and version: what "never changed" is checked against."""
    with RunStore.open(run, readonly=True) as store:
        return {c.index: (hashlib.sha256(c.text.encode()).hexdigest(), c.version) for c in store.chapters()}


def calls(run: str) -> list[tuple[str, int, list[dict]]]:
    with RunStore.open(run, readonly=True) as store:
        return [
            (c.role or "", int(store_unit), c.messages)
            for c, store_unit in zip(
                store.ledger.llm_calls(),
                [r[0] for r in store.query("SELECT unit FROM llm_calls ORDER BY id")],
                strict=True,
            )
        ]


def test_a_finished_book_goes_on_from_its_final_state(server, tmp_path, capsys):
    run = written_book(server, tmp_path / "book")
    before = fingerprints(run)
    with RunStore.open(run, readonly=True) as store:
        final = store.state(2)["narrative"]
        open_keys = list(final["future_requirements"])
        event_keys = list(final["past_events"])
        planned_before = len([r for r, _, _ in calls(run) if r == "plan_outline"])
    assert open_keys and event_keys
    capsys.readouterr()
    assert main(["continue", run, "--words", "500", "--plan-only", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "1 new chapter(s) planned, none written" in out and f"fabula resume {run}" in out
    with RunStore.open(run, readonly=True) as store:
        info, outline = store.info(), store.plans.get("outline")
        assert (info.pipeline, info.status, info.last_unit, info.target_units) == ("nst", "stopped", 2, 3)
        assert [c["id"] for c in outline] == [1, 2, 3] and info.config["words"] == 1000 + 500
        assert store.plans.get("continued")[0]["after"] == 2
    # the planner was shown the final state, its open requirements and the end of the last chapter
    planning = [m for r, _, m in calls(run) if r == "plan_outline"][planned_before:]
    assert len(planning) == 1
    asked = planning[0][-1]["content"]
    assert all(key in asked for key in open_keys + event_keys)
    with RunStore.open(run, readonly=True) as store:
        assert " ".join(store.chapter(2).text.split()[-20:]) in " ".join(asked.split())
    # reviewable as any outline
    assert main(["outline", run]) == 0
    assert "Part 1" in capsys.readouterr().out
    assert main(["resume", run, "--quiet"]) == 0
    with RunStore.open(run, readonly=True) as store:
        info = store.info()
        assert (info.status, info.last_unit) == ("completed", 3)
        searches = [t for t in store.ledger.tool_calls(3) if t.tool == "search"]
    assert fingerprints(run) == {**before, 3: fingerprints(run)[3]}  # chapters 1 and 2 never changed
    # NstAgent wrote chapter 3 with the final state in its prompt and searched the whole book
    first = next(m for r, unit, m in calls(run) if unit == 3 and r == "nst_turn")
    assert all(key in first[1]["content"] for key in event_keys)
    assert searches and "[chapter 1]" in searches[0].result


def test_an_imported_derived_book_goes_on_as_an_nst_run(server, tmp_path, capsys):
    source = tmp_path / "book.md"
    source.write_text("\n".join(f"# Chapter {i}\n\n{prose(300, seed=i)}\n" for i in (1, 2)), encoding="utf-8")
    run = str(tmp_path / "imported")
    assert main(["import", str(source), "--out", run]) == 0
    assert main(["derive", run, "--endpoint", server.url]) == 0
    before = fingerprints(run)
    with RunStore.open(run, readonly=True) as store:
        events = list(store.state(2)["narrative"]["past_events"])
    capsys.readouterr()
    assert main(["continue", run, "--words", "500", "--premise", "The bell is found again.", "--quiet"]) == 0
    with RunStore.open(run, readonly=True) as store:
        info = store.info()
        assert (info.pipeline, info.status, info.last_unit) == ("nst", "completed", 4)  # 500 words: two chapters
        assert store.plans.get("continued")[0]["from_kind"] == "imported"
        outline = store.plans.get("outline")
        assert outline[0]["title"] == "Chapter 1" and "written" in outline[0]["description"]
    assert {k: v for k, v in fingerprints(run).items() if k <= 2} == before
    first = next(m for r, unit, m in calls(run) if unit == 3 and r == "nst_turn")
    assert "The bell is found again." in first[1]["content"] and all(e in first[1]["content"] for e in events)


def test_bad_input_is_one_line_exit_2_and_nothing_written(server, tmp_path, capsys):
    run = written_book(server, tmp_path / "book")
    source = tmp_path / "book.md"
    source.write_text(f"# One\n\n{prose(200)}\n\n# Two\n\n{prose(200, seed=2)}\n", encoding="utf-8")
    imported = str(tmp_path / "imported")
    assert main(["import", str(source), "--out", imported]) == 0
    stopped = str(tmp_path / "stopped")
    assert main(["fork", run, "--at", "1", "--out", stopped, "--no-run"]) == 0

    def snapshot(path: str) -> tuple:
        with RunStore.open(path, readonly=True) as store:
            return store.info(), store.plans.all(), fingerprints(path), len(store.ledger.llm_calls())

    cases = [
        ([run, "--words", "0"], "--words must be between"),
        ([run, "--words", "10"], "--words must be between 500"),  # every length is held to the same rule
        ([run, "--words", "500", "--premise", " "], "--premise is empty"),
        ([run, "--words", "500", "--set", "max_turns=0"], "max_turns"),
        ([imported, "--words", "500"], "fabula derive"),
        ([stopped, "--words", "500"], "is not finished"),
        ([str(tmp_path / "nowhere"), "--words", "500"], ""),
    ]
    for argv, needle in cases:
        states = {p: snapshot(p) for p in (run, imported, stopped)}
        capsys.readouterr()
        assert main(["continue", *argv, "--endpoint", server.url]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err
        assert {p: snapshot(p) for p in (run, imported, stopped)} == states
    assert not (tmp_path / "nowhere").exists()


def test_an_interrupted_continue_resumes_without_losing_or_repeating_work(server, tmp_path, capsys):
    run = written_book(server, tmp_path / "book")
    before = fingerprints(run)
    server.fail_after = server.count + 2  # the new outline, then chapter 3's first turn: the server breaks
    assert main(["continue", run, "--words", "500", "--call-timeout", "5", "--quiet"]) == 1
    server.fail_after = None
    with RunStore.open(run, readonly=True) as store:
        info = store.info()
        assert info.last_unit == 2 and info.status in ("failed", "stopped") and info.target_units == 3
    planned = len([r for r, _, _ in calls(run) if r == "plan_outline"])
    assert main(["resume", run, "--quiet"]) == 0
    with RunStore.open(run, readonly=True) as store:
        assert (store.info().status, store.info().last_unit) == ("completed", 3)
        assert len(store.plans.get("continued")) == 1
    assert len([r for r, _, _ in calls(run) if r == "plan_outline"]) == planned  # not planned again
    assert {k: v for k, v in fingerprints(run).items() if k <= 2} == before
    assert sorted(fingerprints(run)) == [1, 2, 3]


def test_a_continued_books_new_chapters_are_reviewed_and_changed_like_any_outline(server, tmp_path, capsys):
    """An imported book's chapters are of any length: only the new chapters are held to the planner's
    rules, the book's own stay as they are."""
    source = tmp_path / "book.md"
    source.write_text(f"# One\n\n{prose(120, seed=1)}\n\n# Two\n\n{prose(900, seed=2)}\n", encoding="utf-8")
    run = str(tmp_path / "imported")
    assert main(["import", str(source), "--out", run]) == 0
    assert main(["derive", run, "--endpoint", server.url]) == 0
    assert main(["continue", run, "--words", "1000", "--plan-only", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["outline", run, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in shown["chapters"]] == [1, 2, 3, 4]
    shown["chapters"][2]["description"] = "The bell is carried back to the lighthouse at night."
    edited = tmp_path / "outline.json"
    edited.write_text(json.dumps(shown), encoding="utf-8")
    assert main(["outline", run, "--file", str(edited)]) == 0
    with RunStore.open(run, readonly=True) as store:
        assert store.plans.get("outline")[2]["description"] == shown["chapters"][2]["description"]
    shown["chapters"][1]["description"] = "Another story."  # a chapter of the book itself
    edited.write_text(json.dumps(shown), encoding="utf-8")
    assert main(["outline", run, "--file", str(edited)]) == 2
    assert "chapter 2 is already written" in capsys.readouterr().err
    assert main(["resume", run, "--quiet"]) == 0
    with RunStore.open(run, readonly=True) as store:
        assert (store.info().status, store.info().last_unit) == ("completed", 4)
