"""``--drafts N`` (issue 37): N drafts of each chapter through the gate, one chosen by the stated rule (inside the
gate, then the lowest lint score, ...), the others kept and selectable with ``revise --use-draft K``; the
extra drafts' cost is recorded."""

from __future__ import annotations

import pytest

from agent.cli import main
from agent.nst.best_of import DRAFTS_OF, RULE
from agent.store import RunStore
from agent.store.versions import chapter_versions
from tests.nst.author import Author, chapter_of
from tests.nst.author_server import AuthorServer

PROMPT = "A lighthouse keeper finds a bell that rings by itself."
STOCK = ("She let out a breath she didn't know she was holding. The words hung heavy in the air. "
         "A wave of relief washed over her. ")

pytestmark = pytest.mark.usefixtures("no_model_environment")


class StockAuthor(Author):
    """The chapter loop's draft (the first prose of a chapter) is full of stock phrases, the second has one
    of them, the third none: the rule must pick the third."""

    def reply(self, request):
        text, finish = super().reply(request)
        if request.role == "nst_prose":
            attempt = self.prose_attempts[chapter_of(request)] - 1
            if attempt < 2:
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
    assert main(["write", "nst", "--prompt", PROMPT, "--words", "3000", "--endpoint", server.url, "--out", run,
                 "--drafts", "3"]) == 0
    err = capsys.readouterr().err
    assert f"chapter 1: draft 3 of 3 chosen ({RULE})" in err
    with RunStore.open(run, readonly=True) as store:
        record = store.get_plan(DRAFTS_OF)["2"]
        chapter = store.chapter(2)
        versions = [(v.number, v.reason) for v in chapter_versions(store, 2)]
        state = store.state(2)
    assert record["chosen"] == 3 and record["rule"] == RULE and len(record["drafts"]) == 3
    scores = [d["lint"] for d in record["drafts"]]
    assert scores[0] > scores[1] > scores[2] and all(d["in_gate"] for d in record["drafts"])
    assert record["calls"] == 2 and record["completion_tokens"] > 0  # what the two more drafts cost
    assert "breath she didn't know" not in chapter.text and versions == [(1, "write"), (2, "draft 3 of 3 chosen")]
    assert state["rederived"]["version"] == 2  # the chosen draft's state, re-derived
    # the writer picks another draft: a new version, nothing lost
    assert main(["revise", run, "--chapter", "2", "--use-draft", "1", "--no-diff"]) == 0
    with RunStore.open(run, readonly=True) as store:
        assert store.chapter(2).text == record["drafts"][0]["text"] and store.chapter(2).version == 3
        assert store.get_plan(DRAFTS_OF)["2"]["chosen"] == 1
    assert main(["revise", run, "--chapter", "2", "--use-draft", "7"]) == 2
    assert "no draft 7" in capsys.readouterr().err
    assert main(["write", "nst", "--prompt", PROMPT, "--words", "3000", "--endpoint", server.url, "--out",
                 str(tmp_path / "other"), "--drafts", "99"]) == 2
