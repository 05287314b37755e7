"""``fabula reconcile RUN`` (issue 24, item 6) through the CLI against the scripted author behind a
vLLM-shaped server: after an edit that renames a character in chapter 2 of a 5-chapter run (4
written), the states of chapters 2-4 are re-derived in order, the chapters that still use the old
name are listed with quotes, the unwritten chapter's outline entry is re-planned, locked chapters
are never rewritten (hash compared); bad input is one line and exit 2 with nothing written; an
interrupted reconcile continues without asking anything twice."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from agent.cli import main
from agent.store import RunStore
from agent.testing.author import Author, chapter_of, chapter_text, default_policy, update_json
from agent.testing.author_server import AuthorServer

PROMPT = "A lighthouse keeper finds a bell that rings by itself."
CAST = {1: "Ansel Marr", 2: "Ansel Marr", 3: "Ansel Marr", 4: "Cora Vell", 5: "Cora Vell"}
NAME = re.compile(r"\b(?:Ansel|Bram|Cora) (?:Marr|Vell)\b")


def cast_update(request) -> str:
    """An update whose characters are the names the chapter uses, each quoted from it; a name
    "X, once called Y" gets the fact former_name = Y."""
    text = chapter_text(request)
    update = json.loads(update_json(chapter_of(request), characters=0, text=text))
    snaps = []
    for name in sorted(set(NAME.findall(text))):
        sentence = next(s for s in re.split(r"(?<=\.)\s+", text) if name in s)
        former = re.search(rf"{name}, once called ([A-Z][a-z]+ [A-Z][a-z]+)", text)
        snaps.append(
            {
                "name": name,
                "location": "the harbour",
                "goal": "ring the bell",
                "relationships": "",
                "knowledge": "",
                "possessions": "",
                "condition": "well",
                "facts": [{"key": "former_name", "value": former.group(1)}] if former else [],
                "evidence": sentence.strip()[:80],
            }
        )
    update["upsert_character_state"] = snaps
    return json.dumps(update)


CORRECTS: list[int] = []
"""Chapters the writer model tries to correct while writing chapter 5 (the lock test sets it)."""


def cast_policy(request, tools):
    if "update" in tools or not tools:
        return cast_update(request) if "update" in tools else default_policy(request, tools)
    asked = [m["content"] for m in request.messages if m["role"] == "assistant"]
    if "correct" in tools and chapter_of(request) == 5:
        for target in CORRECTS:
            if not any(f'"chapter": {target}' in a and '"correct"' in a for a in asked):
                return json.dumps(
                    {"tool": "correct", "chapter": target, "old": "Mark1 ", "new": "Markone ", "reason": "continuity"}
                )
    return default_policy(request, tools)


class CastAuthor(Author):
    """Prose whose every third sentence starts with the chapter's character (``CAST``)."""

    def __init__(self) -> None:
        super().__init__(policy=cast_policy)

    def reply(self, request):
        text, finish = super().reply(request)
        if request.role == "nst_prose":
            name = CAST[chapter_of(request)]
            text = re.sub(r"\bMark(\d+)\b", lambda m: name if int(m.group(1)) % 3 == 0 else m.group(0), text)
        return text, finish


@pytest.fixture
def server():
    CORRECTS.clear()
    with AuthorServer(CastAuthor(), vllm=True) as running:
        yield running


pytestmark = pytest.mark.usefixtures("no_model_environment")


def four_of_five(server: AuthorServer, tmp_path) -> str:
    """A 5-chapter run with chapters 1-4 written (a fork of a finished one at 4)."""
    full, run = tmp_path / "full", tmp_path / "run"
    assert (
        main(
            [
                "write",
                "nst",
                "--prompt",
                PROMPT,
                "--words",
                "5000",
                "--endpoint",
                server.url,
                "--out",
                str(full),
                "--quiet",
            ]
        )
        == 0
    )
    assert main(["fork", str(full), "--at", "4", "--out", str(run), "--no-run"]) == 0
    with RunStore.open(run, readonly=True) as store:
        assert len(store.plans.get("outline")) == 5 and store.info().last_unit == 4
    return str(run)


def rename_in_chapter_2(run: str, tmp_path) -> str:
    with RunStore.open(run, readonly=True) as store:
        text = store.chapter(2).text
    edited = "Bram Marr, once called Ansel Marr, took the bell down to the pier.\n\n" + text.replace(
        "Ansel Marr", "Bram Marr"
    )
    path = tmp_path / "ch2.md"
    path.write_text(edited, encoding="utf-8")
    assert main(["edit", run, "--chapter", "2", "--file", str(path)]) == 0
    return edited


def hashes(run: str) -> dict[int, str]:
    with RunStore.open(run, readonly=True) as store:
        return {c.index: hashlib.sha256(c.text.encode()).hexdigest() for c in store.chapters()}


def updates(run: str, session: str = "reconcile") -> list[tuple[int, list]]:
    """(chapter, the request's messages) of every update call answered in ``session`` sessions, in order
    (a call the broken server refused is in the ledger too, with its error)."""
    with RunStore.open(run, readonly=True) as store:
        rows = store.query(
            "SELECT c.unit, s.kind FROM llm_calls c JOIN sessions s ON s.id = c.session_id ORDER BY c.id"
        )
        calls = store.ledger.llm_calls()
    return [
        (int(unit), call.messages)
        for (unit, kind), call in zip(rows, calls, strict=True)
        if kind == session and call.role == "nst_turn" and call.error is None
    ]


def test_reconcile_after_a_rename_follows_the_edit_lists_the_old_name_and_replans(server, tmp_path, capsys):
    run = four_of_five(server, tmp_path)
    rename_in_chapter_2(run, tmp_path)
    with RunStore.open(run, readonly=True) as store:
        old_item = store.plans.get("outline")[4]
        assert store.plans.get("stale_after")["unit"] == 2
    before = hashes(run)
    capsys.readouterr()
    assert main(["reconcile", run, "--lock", "4"]) == 0
    out = capsys.readouterr().out
    # the states of 2, 3 and 4 re-derived in order, each from the one just re-derived
    asked = updates(run)
    assert [unit for unit, _ in asked] == [2, 3, 4]
    assert "Bram Marr" in asked[1][1][1]["content"] and "Bram Marr" in asked[2][1][1]["content"]
    with RunStore.open(run, readonly=True) as store:
        states = {i: store.state(i) for i in (2, 3, 4)}
        assert all(s["rederived"]["reconcile"] == 1 for s in states.values())
        assert states[2]["narrative"]["characters"]["Bram Marr"]["facts"] == {"former_name": "Ansel Marr"}
        assert "Bram Marr" in states[4]["narrative"]["characters"]  # carried through 3 into 4
        record = store.plans.get("reconciles")[-1]
        assert record["status"] == "done" and record["rederived"] == [2, 3, 4] and record["locked"] == [4]
        assert store.plans.get("stale_after") is None
        new_item = store.plans.get("outline")[4]
        edits = store.plans.get("plan_edits")
    # chapter 3 still calls him Ansel Marr: listed, with quotes from its text; 4 is locked
    assert "chapter 3: contradicts the new state:" in out and "to rewrite: chapter 3" in out
    quotes = re.findall(r'^  "(.*)"$', out, re.MULTILINE)
    assert quotes and all("Ansel Marr" in q for q in quotes)
    with RunStore.open(run, readonly=True) as store:
        chapter_3 = " ".join(store.chapter(3).text.split())
    assert all(" ".join(q.split()) in chapter_3 for q in quotes)
    assert "chapter 4: locked (approved by the writer)" in out
    # the unwritten chapter re-planned from the new state, the old entry kept in the edit record
    assert new_item["id"] == 5 and new_item["target_words"] == old_item["target_words"]
    assert (new_item["title"], new_item["description"]) != (old_item["title"], old_item["description"])
    assert edits[-1]["by"] == "reconcile" and edits[-1]["previous"]["outline"][4] == old_item
    assert hashes(run) == before  # reconcile changes no chapter's text


def test_locked_chapters_are_never_rewritten(server, tmp_path, capsys):
    run = four_of_five(server, tmp_path)
    rename_in_chapter_2(run, tmp_path)
    assert main(["reconcile", run, "--lock", "3..4"]) == 0
    before = hashes(run)
    CORRECTS.extend([1, 3, 4])  # writing chapter 5, the model tries to correct chapters 1, 3 and 4
    assert main(["resume", run, "--quiet"]) == 0
    after = hashes(run)
    with RunStore.open(run, readonly=True) as store:
        corrects = [
            (json.loads(json.dumps(t.arguments))["chapter"], t.ok, t.result)
            for t in store.ledger.tool_calls(5)
            if t.tool == "correct"
        ]
    assert [c for c, _, _ in corrects] == [1, 3, 4]
    assert corrects[0][1] and after[1] != before[1]  # an unlocked chapter is corrected
    assert not corrects[1][1] and "locked" in corrects[1][2]
    assert (after[3], after[4]) == (before[3], before[4])


def test_bad_input_is_one_line_exit_2_and_nothing_written(server, tmp_path, capsys):
    run = four_of_five(server, tmp_path)

    def snapshot() -> tuple:
        with RunStore.open(run, readonly=True) as store:
            return store.info(), store.plans.all(), hashes(run), len(store.ledger.llm_calls())

    cases = [
        ([run], "no edit to reconcile"),
        ([run, "--from", "9"], "--from must be a written chapter"),
        ([run, "--from", "2", "--lock", "2..1"], "a range goes up"),
        ([run, "--from", "2", "--lock", "7"], "not written"),
        ([str(tmp_path / "none")], ""),
    ]
    for argv, needle in cases:
        before = snapshot()
        capsys.readouterr()
        assert main(["reconcile", *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err
        assert snapshot() == before


@pytest.mark.parametrize("again", ["reconcile", "resume"])
def test_an_interrupted_reconcile_continues_and_asks_nothing_twice(server, tmp_path, capsys, again):
    run = four_of_five(server, tmp_path)
    rename_in_chapter_2(run, tmp_path)
    server.fail_after = server.count + 2  # chapters 2 and 3 re-derived, then the server breaks
    assert main(["reconcile", run, "--call-timeout", "5"]) == 1
    assert "fabula reconcile" in capsys.readouterr().err
    server.fail_after = None
    assert [unit for unit, _ in updates(run)] == [2, 3]
    with RunStore.open(run, readonly=True) as store:
        assert store.plans.get("reconciles")[-1]["status"] == "running"
    assert main([again, run]) == 0  # fabula resume finishes the reconcile before it writes chapter 5
    assert "reconcile 1 of chapter 2" in capsys.readouterr().out
    assert [unit for unit, _ in updates(run)] == [2, 3, 4]  # 2 and 3 not asked again
    with RunStore.open(run, readonly=True) as store:
        records = store.plans.get("reconciles")
        judged = store.query("SELECT unit FROM llm_calls WHERE role = 'reconcile_judge' AND error IS NULL ORDER BY id")
    assert len(records) == 1 and records[0]["status"] == "done"
    assert [r[0] for r in judged] == [3, 4]
    with RunStore.open(run, readonly=True) as store:
        assert store.info().last_unit == (5 if again == "resume" else 4)
