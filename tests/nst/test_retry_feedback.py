"""``retry_feedback`` "reference" (the paper profile): a rejected write is told its count against the target and
range, how far to scale it and whether it is still in the conversation; once a write is accepted the rejected
draft left in full gives way to a placeholder (the NstAgent reference, agent_core.py:2850-3090)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.gate import Gate
from agent.llm.base import Request
from agent.nst.chapter.rejected import reference_feedback
from agent.nst.config import NstConfig
from agent.testing.author import Author, chapter_of, gate_of
from tests.nst.profile_runs import written

GATE = Gate.for_target(1000, 0.8, 1.2)


def test_the_feedback_gives_the_count_the_range_the_scale_and_where_the_draft_is() -> None:
    short = reference_feedback(500, GATE, kept=True)
    assert "500 words" in short and "targets 1000 words and accepts 800-1200" in short
    assert "Lengthen the whole draft to about 200 %" in short and "still in the conversation" in short
    long = reference_feedback(1500, GATE, kept=False)
    assert "Shorten the whole draft to about 67 %" in long and "text was removed" in long
    assert "mid-sentence" in reference_feedback(1000, GATE, kept=True, unended=True)
    assert "Lengthen" not in reference_feedback(1000, GATE, kept=True, unended=True)


def _first_draft_short(request: Request, attempt: int) -> int:
    target = gate_of(request)[0]
    return target // 2 if chapter_of(request) == 1 and attempt == 0 else target


def _run(tmp_path: Path, profile: str) -> tuple[Any, Author]:
    author = Author(length=_first_draft_short)
    return written(tmp_path / profile, "nst", NstConfig, author, profile), author


def _after_acceptance(author: Author) -> list[str]:
    """The assistant messages of chapter 1's first call after its accepted write."""
    chapter_one = [r for r in author.requests if r.role == "nst_turn" and chapter_of(r) == 1]
    accepted = next(r for r in chapter_one if any("ACCEPTED" in m["content"] for m in r.messages))
    return [m["content"] for m in accepted.messages if m["role"] == "assistant"]


def test_paper_tells_the_reference_feedback_and_drops_the_rejected_draft_once_one_is_accepted(tmp_path: Path) -> None:
    store, author = _run(tmp_path, "paper")
    writes = [c for c in store.ledger.tool_calls() if c.unit == 1 and c.tool == "write"]
    assert not json.loads(writes[0].result or "{}")["ok"] and writes[1].arguments["rejected_removed"]
    chapter_one = [r for r in author.requests if r.role == "nst_turn" and chapter_of(r) == 1]
    feedback = chapter_one[1].messages[-1]
    assert feedback["role"] == "user" and "Lengthen the whole draft to about" in feedback["content"]
    drafts = [
        json.loads(call["function"]["arguments"])["content"]
        for m in chapter_one[2].messages  # the first call after the accepted write
        for call in m.get("tool_calls") or []
    ]
    assert drafts[0].startswith("[rejected draft removed") and "words=500" in drafts[0]
    assert not any(len(d.split()) == 500 for d in drafts)  # the rejected prose itself is gone
    _, fabula = _run(tmp_path, "default")
    assert any(len(a.split()) == 500 for a in _after_acceptance(fabula))  # fabula's rule keeps it
