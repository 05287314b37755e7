"""``fabula sequel RUN --out RUN2 --words N`` (issue 24, item 5) through the CLI against the scripted
author behind a vLLM-shaped server: book two starts from book one's final state (checked in the
ledger: book one's facts are in book two's first prompt), open requirements kept unless resolved,
its search covers book one read-only, its export names the series; bad input is one line and exit 2
with nothing written; an interrupted sequel resumes with ``fabula resume``."""

from __future__ import annotations

import json

import pytest

from agent.cli import main
from agent.store import RunStore
from agent.testing.author import Author
from agent.testing.author_server import AuthorServer
from tests.manuscript.test_continue import calls, fingerprints, searching_policy, written_book


@pytest.fixture
def server():
    with AuthorServer(Author(policy=searching_policy), vllm=True) as running:
        yield running


pytestmark = pytest.mark.usefixtures("no_model_environment")


def book_one(run: str) -> tuple:
    """Everything book one holds that a sequel must leave as it is."""
    with RunStore.open(run, readonly=True) as store:
        return store.info(), store.plans.all(), fingerprints(run), len(store.ledger.llm_calls()), store.state()


def test_book_two_starts_from_book_ones_final_state_and_searches_both(server, tmp_path, capsys):
    first = written_book(server, tmp_path / "one")
    two = str(tmp_path / "two")
    with RunStore.open(first, readonly=True) as store:
        final = store.state(2)["narrative"]
        title = store.plans.get("title")
    kept = book_one(first)
    resolved = sorted(final["future_requirements"])[0]
    assert (
        main(
            [
                "sequel",
                first,
                "--out",
                two,
                "--prompt",
                "The keeper's daughter leaves the island.",
                "--words",
                "1000",
                "--resolve",
                resolved,
                "--quiet",
            ]
        )
        == 0
    )
    assert book_one(first) == kept  # book one is only read
    with RunStore.open(two, readonly=True) as store:
        info, initial = store.info(), store.state(0)["narrative"]
        series = store.plans.get("series")
        searches = [t for t in store.ledger.tool_calls(1) if t.tool == "search"]
        assert (info.pipeline, info.status, info.last_unit) == ("nst", "completed", 2)
    # carried: characters with their facts, past events; open requirements but the resolved one
    assert initial["characters"] == final["characters"] and initial["past_events"] == final["past_events"]
    assert set(initial["future_requirements"]) == set(final["future_requirements"]) - {resolved}
    # book two's first prompt holds book one's facts (from the ledger), the planner was told the series
    first_prompt = next(m for role, unit, m in calls(two) if unit == 1 and role == "nst_turn")[1]["content"]
    assert all(key in first_prompt for key in final["past_events"])
    assert all(name in first_prompt for name in final["characters"])
    assert resolved not in first_prompt
    planned = next(m for role, _, m in calls(two) if role == "plan_outline")[-1]["content"]
    assert f'it follows "{title}"' in planned and "The keeper's daughter leaves the island." in planned
    assert all(key in planned for key in final["past_events"])  # planned from where book one ended
    assert series["name"] == title and series["index"] == 2 and series["books"][0]["run"].endswith("one")
    # chapter 1 of book two has no earlier chapter of its own: what it found is book one's
    assert searches and "[book 1, chapter 1]" in searches[0].result
    # the export names the series
    capsys.readouterr()
    assert main(["export", two, "--format", "md"]) == 0
    assert f'series: "{title}"' in capsys.readouterr().out
    assert main(["export", two, "--format", "txt"]) == 0
    assert f"Book 2 of {title}" in capsys.readouterr().out
    assert main(["export", two, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["series"] == {"name": title, "index": 2}


def test_bad_input_is_one_line_exit_2_and_nothing_written(server, tmp_path, capsys):
    first = written_book(server, tmp_path / "one")
    stopped = str(tmp_path / "stopped")
    assert main(["fork", first, "--at", "1", "--out", stopped, "--no-run"]) == 0
    kept = book_one(first)
    out = tmp_path / "two"
    cases = [
        ([first, "--words", "10"], "--words must be between"),
        ([first, "--words", "1000", "--prompt", " "], "--prompt is empty"),
        ([first, "--words", "1000", "--set", "max_turns=0"], "max_turns"),
        ([first, "--words", "1000", "--resolve", "no_such_key"], "no such open requirement"),
        ([stopped, "--words", "1000"], "is not finished"),
        ([first, "--words", "1000", "--out", first], "outside the run"),
        ([first, "--words", "1000", "--out", f"{first}/two"], "outside the run it comes from"),
    ]
    for argv, needle in cases:
        capsys.readouterr()
        args = ["sequel", *argv] if "--out" in argv else ["sequel", *argv, "--out", str(out)]
        assert main([*args, "--endpoint", server.url]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err
        assert not out.exists()
    assert book_one(first) == kept


def test_an_interrupted_sequel_resumes(server, tmp_path, capsys):
    first = written_book(server, tmp_path / "one")
    two = str(tmp_path / "two")
    server.fail_after = server.count + 2  # book two's outline, then its chapter 1's first turn
    assert main(["sequel", first, "--out", two, "--words", "1000", "--call-timeout", "5", "--quiet"]) == 1
    server.fail_after = None
    with RunStore.open(two, readonly=True) as store:
        assert store.info().last_unit == 0 and store.state(0) is not None
    assert main(["resume", two, "--quiet"]) == 0
    with RunStore.open(two, readonly=True) as store:
        assert (store.info().status, store.info().last_unit) == ("completed", 2)
    assert len([r for r, _, _ in calls(two) if r == "plan_outline"]) == 1  # planned once
    assert sorted(fingerprints(two)) == [1, 2]


def test_a_sequel_without_words_is_as_long_as_book_one_was_planned(server, tmp_path, capsys):
    first = written_book(server, tmp_path / "one")
    two = str(tmp_path / "two")
    assert main(["sequel", first, "--out", two, "--plan-only", "--quiet"]) == 0
    with RunStore.open(first, readonly=True) as one, RunStore.open(two, readonly=True) as store:
        assert store.info().config["words"] == one.info().config["words"]
        assert store.plans.get("outline")


def test_a_sequels_series_is_named_later_with_export_series_and_kept(server, tmp_path, capsys):
    first = written_book(server, tmp_path / "one")
    two = str(tmp_path / "two")
    assert main(["sequel", first, "--out", two, "--plan-only", "--quiet"]) == 0
    assert main(["resume", two, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["export", two, "--format", "txt", "--series", "The Keeper Books"]) == 0
    captured = capsys.readouterr()
    assert "Book 2 of The Keeper Books" in captured.out and "recorded series" in captured.err
    assert main(["export", two, "--format", "json"]) == 0  # recorded like --title: later exports keep it
    assert json.loads(capsys.readouterr().out)["series"] == {"name": "The Keeper Books", "index": 2}
    with RunStore.open(two, readonly=True) as store:
        assert store.plans.get("series")["books"][0]["run"].endswith("one")  # the earlier books stay
    assert main(["export", two, "--series", "  "]) == 2  # an empty name: one line, exit 2
    # book one named first: its sequels carry the name
    assert main(["export", first, "--format", "txt", "--series", "Lanterns"]) == 0
    assert "Book 1 of Lanterns" in capsys.readouterr().out
    three = str(tmp_path / "three")
    assert main(["sequel", first, "--out", three, "--plan-only", "--quiet"]) == 0
    with RunStore.open(three, readonly=True) as store:
        assert store.plans.get("series")["name"] == "Lanterns" and store.plans.get("series")["index"] == 2
