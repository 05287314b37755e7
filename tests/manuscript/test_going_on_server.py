"""``fabula continue`` and ``fabula sequel`` on the real CPU vLLM server (the tiny-cpu preset), one
new chapter each (issue 24, items 4 and 5). Book one is written by the scripted author (its state
is known and rich, and it costs seconds); the new chapter is planned and written by the real model.
The state is carried: book one's facts are in the first prompt of the new chapter, read back from
the run's ledger.

Both are ``slow`` as well as ``server``: measured at 363 s (continue) and 468 s (sequel), plus 68 s
to start the server, on 2 cores shared with another vLLM server and a full test suite; the tiny
model's drafts run to their token cap (6-10 tokens/s there), three drafts and an update each."""

from __future__ import annotations

import pytest

from agent.cli import main
from agent.store import RunStore
from agent.testing.author_server import AuthorServer
from tests.manuscript.test_continue import calls, fingerprints

PROMPT = "A lighthouse keeper finds a bell that rings by itself."
BOUNDED = ["--set", "max_turns=3", "--set", "update_max_tokens=512", "--set", "tool_max_tokens=96"]
"""The tiny model's chapter in the fewest turns (write, update, finish) and bounded replies: its
default 4,096-token update alone takes minutes on the CPU."""


pytestmark = pytest.mark.usefixtures("no_model_environment")


def scripted_book(tmp_path) -> str:
    """Book one: two chapters of 500 words by the scripted author."""
    run = tmp_path / "one"
    with AuthorServer(vllm=True) as author:
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
                    author.url,
                    "--out",
                    str(run),
                    "--quiet",
                ]
            )
            == 0
        )
    return str(run)


def carried(run: str, first_prompt: str) -> list[str]:
    """Book one's past events (key and description) found in ``first_prompt``."""
    with RunStore.open(run, readonly=True) as store:
        events = store.state(2)["narrative"]["past_events"]
    return [key for key, text in events.items() if key in first_prompt and text in first_prompt]


@pytest.mark.server
@pytest.mark.slow
def test_continue_writes_one_chapter_on_the_real_server(vllm_server, tmp_path):
    run = scripted_book(tmp_path)
    before = fingerprints(run)
    assert (
        main(
            [
                "continue",
                run,
                "--words",
                "500",
                "--endpoint",
                vllm_server.endpoint,
                "--model",
                vllm_server.model,
                "--quiet",
                *BOUNDED,
            ]
        )
        == 0
    )
    with RunStore.open(run, readonly=True) as store:
        info = store.info()
        assert (info.status, info.last_unit, info.target_units) == ("completed", 3, 3)
        assert store.chapter(3).words > 0 and info.model == vllm_server.model
    assert {k: v for k, v in fingerprints(run).items() if k <= 2} == before
    first = next(m for role, unit, m in calls(run) if unit == 3 and role == "nst_turn")[1]["content"]
    assert carried(run, first), first[:2000]
    planned = [m for role, unit, m in calls(run) if role == "plan_outline"][-1][-1]["content"]
    assert "Its narrative state after the last chapter" in planned


@pytest.mark.server
@pytest.mark.slow
def test_sequel_writes_one_chapter_of_book_two_on_the_real_server(vllm_server, tmp_path):
    run = scripted_book(tmp_path)
    two = str(tmp_path / "two")
    before = fingerprints(run)
    assert (
        main(
            [
                "sequel",
                run,
                "--out",
                two,
                "--prompt",
                "The bell is stolen from the lighthouse.",
                "--words",
                "500",
                "--endpoint",
                vllm_server.endpoint,
                "--model",
                vllm_server.model,
                "--quiet",
                *BOUNDED,
            ]
        )
        == 0
    )
    assert fingerprints(run) == before
    with RunStore.open(two, readonly=True) as store:
        info = store.info()
        assert (info.status, info.last_unit, info.target_units) == ("completed", 1, 1)
        assert store.plans.get("series")["index"] == 2
    first = next(m for role, unit, m in calls(two) if unit == 1 and role == "nst_turn")[1]["content"]
    assert carried(run, first), first[:2000]  # a fact of book one in book two's first prompt
