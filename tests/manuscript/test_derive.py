"""``fabula derive RUN`` (issue 24, item 2) with the scripted author over an imported book of many
chapters: the state grows in order through NstAgent's update path, each entry's evidence checked
against its own chapter; a failing chapter is marked, the next goes on, and derive again retries it
alone; a derive interrupted mid-book continues and asks no chapter twice (calls counted in the ledger)."""

from __future__ import annotations

import json
import re

import pytest

from agent.cli import main
from agent.store import RunStore
from agent.testing.author import Author, chapter_of, default_policy, prose, update_json
from tests.eval.helpers import make_run
from tests.nst.queued import QueuedModels

CHAPTERS = 12


@pytest.fixture
def models(monkeypatch) -> QueuedModels:
    return QueuedModels(monkeypatch)


def book(tmp_path, chapters: int = CHAPTERS) -> str:
    """A Markdown book of ``chapters`` chapters of distinct prose, imported as a run."""
    parts = [f"# Chapter {i}\n\n{prose(140, seed=i)}\n" for i in range(1, chapters + 1)]
    source = tmp_path / "book.md"
    source.write_text("\n".join(parts), encoding="utf-8")
    run = tmp_path / "book"
    assert main(["import", str(source), "--out", str(run)]) == 0
    return str(run)


def updates(run: str) -> list[tuple[int, bool]]:
    """(chapter, ok) of every update call in the ledger, in order."""
    with RunStore.open(run, readonly=True) as store:
        rows = store.query("SELECT unit, ok FROM tool_calls WHERE tool = 'update' ORDER BY id")
    return [(int(unit), bool(ok)) for unit, ok in rows]


def calls(run: str) -> list[int]:
    with RunStore.open(run, readonly=True) as store:
        return [int(r[0]) for r in store.query("SELECT unit FROM llm_calls ORDER BY id")]


def occurs(quote: str, text: str) -> bool:
    return " ".join(quote.split()) in " ".join(text.split())


def test_the_state_grows_chapter_by_chapter_with_evidence_from_each(tmp_path, models, capsys):
    run = book(tmp_path)
    capsys.readouterr()
    assert main(["derive", run]) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("derive: chapter")]
    assert len(lines) == CHAPTERS and "[1/12]" in lines[0] and "[12/12]" in lines[-1]
    assert all("entries applied" in ln and "elapsed, ETA" in ln for ln in lines), lines
    assert lines[-1].endswith("ETA 0:00")
    assert "12 chapter state(s) derived, 0 failed, 0 already derived; 12 model call(s)" in err
    with RunStore.open(run, readonly=True) as store:
        texts = {c.index: c.text for c in store.chapters()}
        previous: set[str] = set()
        for k in range(1, CHAPTERS + 1):
            state = store.state(k)
            assert state["chapter"]["heading"] == f"Chapter {k}"  # what the import stored stays
            assert state["derived"]["ok"] is True and state["derived"]["calls"] == 1
            events = set(state["narrative"]["past_events"])
            assert previous < events and {e for e in events if e.startswith(f"ch{k}_")}  # grows, in order
            assert not any(e.startswith(f"ch{k + 1}_") for e in events)
            previous = events
            own = [
                entry["quote"]
                for collection in state["narrative"]["provenance"].values()
                for entry in collection.values()
                if entry["chapter"] == k
            ]
            assert own and all(occurs(q, texts[k]) for q in own)
        assert store.info().status == "completed"  # the derive advanced nothing
        assert store.query("SELECT kind FROM sessions ORDER BY id DESC LIMIT 1")[0][0] == "derive"
    assert calls(run) == list(range(1, CHAPTERS + 1))  # one call per chapter, attributed to it
    assert updates(run) == [(k, True) for k in range(1, CHAPTERS + 1)]
    # chapter k's prompt held the state after k-1 (chapter 1's none)
    prompt_4 = models.opened[0].requests[3].messages[1]["content"]
    assert "ch3_event_0" in prompt_4 and "ch4_event_0" not in prompt_4
    assert main(["derive", run]) == 0 and "nothing to do" in capsys.readouterr().err
    assert len(calls(run)) == CHAPTERS


BAD_CHAPTER = 5


def wrong_quotes(request, tools):
    """Chapter 5's update quotes chapter 4 (a model confusing chapters): every entry is refused."""
    if "update" in tools and chapter_of(request) == BAD_CHAPTER:
        return update_json(BAD_CHAPTER, text=prose(140, seed=BAD_CHAPTER - 1))
    return default_policy(request, tools)


def test_a_failing_chapter_is_marked_the_next_goes_on_and_derive_again_retries_it_alone(tmp_path, models, capsys):
    run = book(tmp_path)
    models.queue.append(Author(policy=wrong_quotes))
    assert main(["derive", run]) == 1
    err = capsys.readouterr().err
    assert f"derive: chapter {BAD_CHAPTER} 'Chapter {BAD_CHAPTER}' [5/12]: failed (" in err
    assert "does not occur in chapter 5" in err
    assert "11 chapter state(s) derived, 1 failed" in err and "failed: chapter(s) 5 (fabula derive" in err
    with RunStore.open(run, readonly=True) as store:
        marked = store.state(BAD_CHAPTER)
        assert "narrative" not in marked and marked["derived"]["ok"] is False
        assert "does not occur in chapter 5" in marked["derived"]["error"]
        after = store.state(BAD_CHAPTER + 1)["narrative"]["past_events"]
        assert "ch4_event_0" in after and "ch6_event_0" in after and "ch5_event_0" not in after
    before = len(calls(run))
    assert main(["derive", run]) == 0
    err = capsys.readouterr().err
    assert "deriving the state of 1 of 12 chapters (1 failed before: retried)" in err
    assert calls(run)[before:] == [BAD_CHAPTER]  # only the failed chapter is asked again
    with RunStore.open(run, readonly=True) as store:
        state = store.state(BAD_CHAPTER)
        assert state["derived"]["ok"] is True and state["derived"]["attempts"] == 2
        assert "ch4_event_0" in state["narrative"]["past_events"]  # from the state before it
        assert "ch5_event_0" in state["narrative"]["past_events"]


class Interrupted(Author):
    """Ctrl-C arrives while chapter ``at``'s update is asked."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at

    def _complete(self, request):
        if chapter_of(request) == self.at:
            raise KeyboardInterrupt
        return super()._complete(request)


def test_an_interrupted_derive_continues_and_asks_no_chapter_twice(tmp_path, models, capsys):
    run = book(tmp_path)
    models.queue.append(Interrupted(at=8))
    assert main(["derive", run]) == 130
    assert calls(run) == list(range(1, 8))
    capsys.readouterr()
    assert main(["derive", run]) == 0
    err = capsys.readouterr().err
    assert "deriving the state of 5 of 12 chapters" in err and "7 already derived" in err
    assert calls(run) == list(range(1, CHAPTERS + 1))  # every chapter asked exactly once
    assert updates(run) == [(k, True) for k in range(1, CHAPTERS + 1)]
    with RunStore.open(run, readonly=True) as store:
        assert "ch7_event_0" in store.state(8)["narrative"]["past_events"]
        assert store.info().status == "completed"


def test_bad_input_is_one_line_and_exit_2(tmp_path, models, capsys):
    written = make_run(tmp_path, "written", ["Some words of a story."])
    assert main(["derive", str(written)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a nst run; fabula derive builds the state of a run made by fabula import" in err[0]
    assert main(["derive", str(tmp_path / "missing")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not models.opened  # refused before any model is opened


def test_the_view_shows_the_derived_state(tmp_path, models):
    from starlette.testclient import TestClient

    from agent.view.app import create_app

    run = book(tmp_path, chapters=3)
    assert main(["derive", run]) == 0
    page = TestClient(create_app(run)).get("/run/book/state")
    assert page.status_code == 200 and "ch3_event_0" in page.text and "Character" in page.text


def test_derive_on_a_server_then_again_on_the_server_it_used(tmp_path, monkeypatch, capsys):
    """The model option group on a real HTTP endpoint (the scripted author behind it): the server
    breaks mid-book, and derive with no flags continues on the server the run was derived on."""
    from agent.testing.author_server import AuthorServer

    for name in ("FABULA_ENDPOINT", "FABULA_MODEL", "FABULA_API_KEY", "FABULA_CALL_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    run = book(tmp_path, chapters=4)
    with AuthorServer(vllm=True) as server:
        server.fail_after = 3  # the probe's chat, chapters 1 and 2, then HTTP 500 (a server gone)
        assert main(["derive", run, "--endpoint", server.url, "--call-timeout", "3"]) == 1
        err = capsys.readouterr().err
        assert f"at {server.url}" in err
        done = int(re.search(r"(\d) chapter state\(s\) derived, 0 failed", err).group(1))
        assert 1 <= done < 4 and f"stopped: the server is unavailable at chapter {done + 1}" in err
        assert "continues from there" in err
        with RunStore.open(run, readonly=True) as store:
            assert "derived" not in store.state(done + 1)  # no chapter's failure: nothing marked
        server.fail_after = None
        assert main(["derive", run]) == 0
        err = capsys.readouterr().err
        assert f"deriving the state of {4 - done} of 4 chapters with" in err and server.url in err
    assert [unit for unit, ok in updates(run) if ok] == [1, 2, 3, 4]


def test_a_chapter_edited_after_its_derive_is_derived_again_alone(tmp_path, models, capsys):
    run = book(tmp_path, chapters=4)
    assert main(["derive", run]) == 0
    edited = tmp_path / "ch2.md"
    edited.write_text(prose(140, seed=99), encoding="utf-8")
    assert main(["edit", run, "--chapter", "2", "--file", str(edited), "--no-rederive"]) == 0
    before = len(calls(run))
    capsys.readouterr()
    assert main(["derive", run]) == 0
    assert "deriving the state of 1 of 4 chapters" in capsys.readouterr().err
    assert calls(run)[before:] == [2]
    with RunStore.open(run, readonly=True) as store:
        state = store.state(2)
        assert state["derived"]["version"] == store.chapter(2).version == 2
        own = [e["quote"] for c in state["narrative"]["provenance"].values() for e in c.values() if e["chapter"] == 2]
        assert own and all(occurs(q, store.chapter(2).text) for q in own)


def finds_nothing(request, tools):
    """A model that reads each chapter and reports no character, event or requirement."""
    if "update" in tools:
        return json.dumps(
            {
                "tool": "update",
                "upsert_character_state": [],
                "add_past_event": [],
                "add_future_requirement": [],
                "resolve_future_requirement": [],
            }
        )
    return default_policy(request, tools)


def test_a_derive_that_finds_nothing_says_so_and_does_not_call_it_derived(tmp_path, models, capsys):
    run = book(tmp_path, chapters=3)
    models.queue.append(Author(policy=finds_nothing))
    capsys.readouterr()
    main(["derive", run])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("derive: chapter")]
    assert len(lines) == 3 and all("nothing found in this chapter" in ln for ln in lines), lines
    last = err.strip().splitlines()[-1]
    assert "0 characters, 0 past events, 0 open requirements" in last and "nothing could be derived" in last
    assert "state(s) derived" not in last
    assert main(["derive", run]) == 0
    again = capsys.readouterr().err
    assert "nothing could be derived" in again and "every chapter's state is derived" not in again


def test_the_state_page_of_a_failed_chapter_says_when_what_failed_and_which_tool_in_a_writers_words(tmp_path, models):
    from starlette.testclient import TestClient

    from agent.view.app import create_app

    run = book(tmp_path, chapters=6)
    models.queue.append(Author(policy=wrong_quotes))
    assert main(["derive", run]) == 1
    page = TestClient(create_app(run)).get("/run/book/state")
    assert page.status_code == 200
    failed = page.text.split('id="state-5"', 1)[1].split("</article>", 1)[0]
    for raw in ("ok: false", "ok: False", "upsert_character_state", "copy a passage", "at: 1", "attempts:"):
        assert raw not in failed, (raw, failed)
    assert "The state after this chapter could not be derived" in failed
    assert "updating a character (Character 7)" in failed
    assert "does not occur in chapter 5" in failed and re.search(r"\d{1,2} \w{3} \d{4}, \d\d:\d\d", failed)
    assert "fabula derive" in failed and "<dt>" not in failed  # the next step; no raw record
