"""Under ``paper`` a chapter draft that stops mid-sentence is rejected, as the NstAgent reference's write
tool rejects it (agent_core.py:5210-5217); the default keeps fabula's gate (length and a clean stop)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.llm.base import Request
from agent.nst.chapter.drafter import ends_a_sentence
from agent.nst.config import NstConfig
from agent.testing.author import Author, chapter_of
from tests.nst.profile_runs import written


@pytest.mark.parametrize(
    ("text", "ended"),
    [
        ("She rang the bell.", True),
        ('"Ring it," she said."', True),
        ("Was it the bell?)", True),
        ("It rang… ", True),
        ("钟声响了。", True),
        ("*The end.*", True),
        ("She rang the bell and", False),
        ("She rang the bell,", False),
        ("", False),
    ],
)
def test_a_sentence_ends_on_terminal_punctuation_closers_aside(text: str, ended: bool) -> None:
    assert ends_a_sentence(text) is ended


class Unended(Author):
    """Chapter 1's first draft stops mid-sentence (its length inside the range)."""

    def reply(self, request: Request) -> tuple[str, str]:
        text, finish = super().reply(request)
        if request.role == "nst_prose" and not any(r.role == "nst_prose" for r in self.requests[:-1]):
            text = text.rstrip().rstrip(".") + " and the bell"
        return text, finish

    def native_draft(self, request: Request) -> dict[str, Any]:
        draft = super().native_draft(request)
        if chapter_of(request) == 1 and self.prose_attempts[1] == 1:
            draft["content"] = draft["content"].rstrip().rstrip(".") + " and the bell"
        return draft


def _run(tmp_path: Path, profile: str) -> Any:
    return written(tmp_path / profile, "nst", NstConfig, Unended(), profile)


def test_paper_rejects_a_draft_that_stops_mid_sentence(tmp_path: Path) -> None:
    writes = [c for c in _run(tmp_path, "paper").ledger.tool_calls() if c.unit == 1 and c.tool == "write"]
    assert [c.arguments.get("unended", False) for c in writes] == [True, False]
    assert "mid-sentence" in (writes[0].result or "") and writes[1].ok
    default = [c for c in _run(tmp_path, "default").ledger.tool_calls() if c.unit == 1 and c.tool == "write"]
    assert len(default) == 1 and "ACCEPTED" in (default[0].result or "")
