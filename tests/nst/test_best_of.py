"""``--drafts N`` (issue 37): N drafts of each chapter through the gate, one chosen by the stated rule (inside the
gate, then the lowest lint score, ...), the others kept and selectable with ``revise --use-draft K``; the
extra drafts' cost is recorded."""

from __future__ import annotations

import json
import threading
import time

import pytest

from agent.cli import main
from agent.nst.best_of.runner import DRAFTS_OF, JUDGE_RULE, RULE
from agent.nst.chapter.avoid import LINT_AVOID_KEY
from agent.nst.runner import write_story
from agent.store import RunStore
from agent.store.writer.versions import chapter_versions
from agent.testing.author import Author, chapter_of, last_user
from agent.testing.author_server import AuthorServer

PROMPT = "A lighthouse keeper finds a bell that rings by itself."
STOCK = (
    "She let out a breath she didn't know she was holding. The words hung heavy in the air. "
    "A wave of relief washed over her. "
)

pytestmark = pytest.mark.usefixtures("no_model_environment")


class StockAuthor(Author):
    """The chapter loop's draft (the first prose of a chapter) is full of stock phrases, the second has one
    of them, the third none: the rule must pick the third (whichever of the two drafts written at once it is)."""

    lock = threading.Lock()

    def reply(self, request):
        with self.lock:
            text, finish = super().reply(request)
            attempt = self.prose_attempts.get(chapter_of(request), 0) - 1
        if request.role == "nst_prose" and attempt < 2:
            stock = STOCK if attempt == 0 else STOCK.split(". ")[0] + ". "
            words = len(stock.split())
            text = stock + " ".join(text.split(" ")[words:])
        return text, finish


@pytest.fixture
def server():
    with AuthorServer(StockAuthor(), vllm=True) as running:
        yield running


def test_drafts_n_chooses_by_the_rule_keeps_the_others_and_records_the_cost(server, tmp_path, capsys):
    run = str(tmp_path / "run")
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
                run,
                "--drafts",
                "3",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    with RunStore.open(run, readonly=True) as store:
        record = store.plans.get(DRAFTS_OF)["2"]
        first = store.plans.get(DRAFTS_OF)["1"]["chosen"]
        chapter = store.chapter(2)
        versions = [(v.number, v.reason) for v in chapter_versions(store, 2)]
        state = store.state(2)
    assert f"chapter 1: draft {first} of 3 chosen ({RULE})" in err and first in (2, 3)
    chosen = record["chosen"]
    assert chosen in (2, 3) and record["rule"] == RULE and len(record["drafts"]) == 3
    scores = sorted(d["lint"] for d in record["drafts"])
    assert scores[0] < scores[1] < scores[2] == record["drafts"][0]["lint"]
    assert all(d["in_gate"] for d in record["drafts"])
    assert record["drafts"][chosen - 1]["lint"] == scores[0]
    assert record["calls"] == 2 and record["completion_tokens"] > 0  # what the two more drafts cost
    assert "breath she didn't know" not in chapter.text
    assert versions == [(1, "write"), (2, f"draft {chosen} of 3 chosen")]
    assert state["rederived"]["version"] == 2  # the chosen draft's state, re-derived
    # the writer picks another draft: a new version, nothing lost
    assert main(["revise", run, "--chapter", "2", "--use-draft", "1", "--no-diff"]) == 0
    with RunStore.open(run, readonly=True) as store:
        assert store.chapter(2).text == record["drafts"][0]["text"] and store.chapter(2).version == 3
        assert store.plans.get(DRAFTS_OF)["2"]["chosen"] == 1
    assert main(["revise", run, "--chapter", "2", "--use-draft", "7"]) == 2
    assert "no draft 7" in capsys.readouterr().err
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
                str(tmp_path / "other"),
                "--drafts",
                "99",
            ]
        )
        == 2
    )


class SlowProseAuthor(Author):
    """Each prose reply takes a moment and the author counts how many are being written at once."""

    def __init__(self) -> None:
        super().__init__()
        self.lock, self.writing, self.most_at_once = threading.Lock(), 0, 0

    def reply(self, request):
        if request.role != "nst_prose":
            return super().reply(request)
        with self.lock:
            self.writing += 1
            self.most_at_once = max(self.most_at_once, self.writing)
            text, finish = super().reply(request)
        time.sleep(0.3)
        with self.lock:
            self.writing -= 1
        return text, finish


def test_drafts_n_on_a_server_are_written_at_once_and_the_run_says_so(tmp_path, capsys):
    author = SlowProseAuthor()
    run = str(tmp_path / "run")
    with AuthorServer(author, vllm=True) as running:
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
                    running.url,
                    "--out",
                    run,
                    "--quiet",
                    "--drafts",
                    "3",
                ]
            )
            == 0
        )
    assert author.most_at_once == 2  # the two more drafts of a chapter: together, not one after another
    with RunStore.open(run, readonly=True) as store:
        record = store.plans.get(DRAFTS_OF)["1"]
    assert record["at_once"] == 2 and len(record["drafts"]) == 3


class JudgingAuthor(Author):
    """The drafts judge names the last draft for chapter 1 and a draft it was never shown for chapter 2."""

    def __init__(self) -> None:
        super().__init__()
        self.judged: list[list[str]] = []

    def choose_draft(self, request):
        self.judged.append([m["role"] for m in request.messages])
        if "must carry out: chapter 2," in last_user(request):
            return json.dumps({"draft": 5, "reason": "draft 5 is best"})
        return super().choose_draft(request)


def test_drafts_judge_chooses_with_a_reason_shown_and_falls_back_to_the_rule(tmp_path, capsys):
    author = JudgingAuthor()
    run = str(tmp_path / "run")
    with AuthorServer(author, vllm=True) as running:
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
                    running.url,
                    "--out",
                    run,
                    "--quiet",
                    "--drafts",
                    "2",
                    "--drafts-judge",
                ]
            )
            == 0
        )
    assert author.judged and all(roles == ["system", "user"] for roles in author.judged)  # strict role order
    with RunStore.open(run, readonly=True) as store:
        first, second = store.plans.get(DRAFTS_OF)["1"], store.plans.get(DRAFTS_OF)["2"]
        versions = [v.reason for v in chapter_versions(store, 1)]
    assert first["chosen"] == 2 and first["rule"] == JUDGE_RULE
    assert first["reason"] == "draft 2 carries out the outline item most closely" and first["calls"] == 2
    assert versions == ["write", "draft 2 of 2 chosen"]
    assert second["rule"] == RULE and "could not be used (it named draft 5, which it was not shown)" in second["reason"]
    capsys.readouterr()
    assert main(["show", run]) == 0
    shown = capsys.readouterr().out
    assert f"drafts    chapter 1: draft 2 of 2 by {JUDGE_RULE}: draft 2 carries out the outline item" in shown
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
                "http://127.0.0.1:9/v1",
                "--out",
                str(tmp_path / "other"),
                "--drafts-judge",
            ]
        )
        == 2
    )
    assert "give --drafts N too" in capsys.readouterr().err


def test_continue_and_sequel_take_drafts_and_lint_avoid(server, tmp_path):
    run, two = str(tmp_path / "run"), str(tmp_path / "two")
    assert (
        main(["write", "nst", "--prompt", PROMPT, "--words", "1000", "--endpoint", server.url, "--out", run, "--quiet"])
        == 0
    )
    with RunStore.open(run, readonly=True) as store:
        written = store.info().last_unit
    assert (
        main(["continue", run, "--words", "1000", "--endpoint", server.url, "--quiet", "--drafts", "2", "--lint-avoid"])
        == 0
    )
    assert (
        main(
            [
                "sequel",
                run,
                "--out",
                two,
                "--words",
                "1000",
                "--endpoint",
                server.url,
                "--quiet",
                "--drafts",
                "2",
                "--lint-avoid",
            ]
        )
        == 0
    )
    for path, first_new in ((run, written + 1), (two, 1)):
        with RunStore.open(path, readonly=True) as store:
            records, last = store.plans.get(DRAFTS_OF), store.info().last_unit
            assert store.plans.get(LINT_AVOID_KEY) is True
        assert sorted(map(int, records)) == list(range(first_new, last + 1))  # every new chapter, none before
        assert all(len(r["drafts"]) == 2 and "chosen" in r for r in records.values())


def test_drafts_in_process_are_written_one_after_another_on_the_run_thread(store, config):
    threads: set[int] = set()

    class Recording(Author):
        def reply(self, request):
            threads.add(threading.get_ident())
            return super().reply(request)

    author = Recording()
    author.recorders.append(store.ledger.recorder)
    store.plans.put("drafts", {"n": 3})
    with store.sessions.hold("start"):
        write_story(store, author, config)
    assert threads == {threading.get_ident()}  # an in-process model is never called from another thread
    records = store.plans.get(DRAFTS_OF)
    assert sorted(records) == ["1", "2"] and all(r["at_once"] == 1 and len(r["drafts"]) == 3 for r in records.values())
