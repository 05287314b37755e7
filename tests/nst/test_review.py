"""``--review`` and ``fabula approve`` (issue 37): a run stops for the writer after its outline and after each
committed chapter (or every K); approve writes on; revise changes the chapter first; ``runs`` and ``show``
say "in review" with the commands to go on; a plain resume does not skip the writer."""

from __future__ import annotations

import pytest

from agent.cli import main
from agent.store import RunStore
from agent.store.writer.review import actions
from agent.testing.author import Author
from agent.testing.author_server import AuthorServer

PROMPT = "A lighthouse keeper finds a bell that rings by itself."

pytestmark = pytest.mark.usefixtures("no_model_environment")


@pytest.fixture
def server():
    with AuthorServer(Author(), vllm=True) as running:
        yield running


def status(run: str) -> tuple[str, int, dict | None]:
    with RunStore.open(run, readonly=True) as store:
        return store.live_status(), store.info().last_unit, store.plans.get("in_review")


def test_write_with_review_stops_for_the_outline_and_each_chapter_until_approved(server, tmp_path, capsys):
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
                "--quiet",
                "--review",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert status(run) == ("review", 0, status(run)[2]) and status(run)[2]["unit"] == 0
    assert "in review: the outline" in out and f"fabula approve {run}" in out
    assert main(["approve", run, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert status(run)[:2] == ("review", 1) and "in review: chapter 1" in out
    assert f'fabula revise {run} --chapter 1 --note "..."' in out
    # a plain resume does not skip the writer
    assert main(["resume", run]) == 1
    assert "is in review: chapter 1; go on with fabula approve" in capsys.readouterr().err
    # runs and show say so, with the commands to go on
    assert main(["runs", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    assert "review" in listed.splitlines()[1] and f"fabula approve {run} writes on" in listed
    # the writer revises chapter 1 first; the run still waits; then approves
    assert main(["revise", run, "--chapter", "1", "--note", "Open at dawn on the cliff", "--no-diff"]) == 0
    assert status(run)[:2] == ("review", 1)
    assert main(["approve", run, "--quiet"]) == 0
    assert status(run)[:2] == ("review", 2)
    with RunStore.open(run, readonly=True) as store:
        assert store.chapter(1).text.startswith("Open at dawn on the cliff.") and store.chapter(2).version == 1
    capsys.readouterr()
    assert main(["show", run]) == 0
    shown = capsys.readouterr().out
    assert "status    review" in shown and "review    chapter 2; go on with:" in shown
    # the last approval writes on to the end without review
    assert main(["approve", run, "--quiet", "--no-review"]) == 0
    assert status(run) == ("completed", 3, None)
    with RunStore.open(run, readonly=True) as store:
        log = [(a["what"], a["unit"]) for a in actions(store)]
    assert log == [("approve", 0), ("revise", 1), ("approve", 1), ("approve", 2)]  # every action recorded


def test_review_every_k_chapters_and_resume_turns_it_on(server, tmp_path, capsys):
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
                "--plan-only",
            ]
        )
        == 0
    )
    assert main(["resume", run, "--review", "every=2", "--quiet"]) == 0
    assert status(run)[:2] == ("review", 0)  # the outline first
    assert main(["approve", run, "--quiet"]) == 0
    assert status(run)[:2] == ("review", 2)
    assert main(["approve", run, "--quiet"]) == 0
    assert status(run)[:2] == ("review", 4)
    assert main(["approve", run, "--stop"]) == 0
    assert status(run)[0] == "stopped"


def test_review_refuses_bad_input_in_one_line(server, tmp_path, capsys):
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
                "--quiet",
                "--review",
                "every=x",
            ]
        )
        == 2
    )
    assert "--review-every must be a whole number from 1 to 10000, got 'x'" in capsys.readouterr().err
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
                "--quiet",
                "--review-every",
                "0",
            ]
        )
        == 2
    )
    assert "--review-every must be from 1 to 10000, got 0" in capsys.readouterr().err
    assert (
        main(["write", "nst", "--prompt", PROMPT, "--words", "3000", "--endpoint", server.url, "--out", run, "--quiet"])
        == 0
    )
    assert main(["approve", run]) == 2
    assert "is not in review: nothing to approve" in capsys.readouterr().err


def test_resume_review_before_the_run_reads_the_run_as_the_run(server, tmp_path, capsys):
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
                "--plan-only",
            ]
        )
        == 0
    )
    assert main(["resume", "--review", run, "--quiet"]) == 0  # --review takes no value: RUN is the run
    assert status(run)[:2] == ("review", 0)
    assert main(["approve", run, "--quiet"]) == 0
    assert status(run)[:2] == ("review", 1)
    assert main(["approve", "--stop", run]) == 0
    assert main(["resume", "--review-every", "2", run, "--quiet"]) == 0
    assert status(run)[:2] == ("review", 2)


def test_a_run_killed_between_a_commit_and_its_review_enters_that_review_on_resume(server, tmp_path, monkeypatch):
    import agent.nst.runner as runner

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
                "--quiet",
                "--review",
            ]
        )
        == 0
    )
    real = runner.pause_after

    def killed(store, unit):  # the process dies after chapter 1 is committed, before it enters review
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "pause_after", killed)
    assert main(["approve", run, "--quiet"]) == 130
    assert status(run)[1:] == (1, None)  # committed, not in review
    monkeypatch.setattr(runner, "pause_after", real)
    assert main(["resume", run, "--quiet"]) == 0
    assert status(run) == ("review", 1, status(run)[2]) and status(run)[2]["unit"] == 1  # the review it owed
    with RunStore.open(run, readonly=True) as store:
        assert store.chapter(2) is None  # nothing written past the unseen chapter
