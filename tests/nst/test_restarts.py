"""Under ``paper`` a failed chapter is restarted from its checkpoint and never kept degraded; a chapter that
fails every restart fails the run, resumable, with nothing of it committed (the reference's
``--auto-resumes 3``, README.md:78; Direct: no resume, direct.py:374)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.llm.base import Request
from agent.nst.chapter.restarts import RESTART_TOOL, ChapterFailedError
from agent.nst.config import DirectConfig, NstConfig, RollSumConfig
from agent.store import RunStore
from agent.testing.author import Author, chapter_of, gate_of
from tests.nst.profile_runs import written


def short_until(good_from: int, chapter: int | None = 2):
    """Drafts of ``chapter`` (None: of every chapter) half their target until the ``good_from``-th draft of
    that chapter (counted across tries), then on target."""
    drafts: dict[int, int] = {}

    def length(request: Request, attempt: int) -> int:
        target, number = gate_of(request)[0], chapter_of(request)
        drafts[number] = drafts.get(number, 0) + 1
        return target // 2 if chapter in (None, number) and drafts[number] <= good_from else target

    return length


def _run(tmp_path: Path, name: str, cls: type, author: Author, profile: str = "paper", **over: Any) -> RunStore:
    return written(tmp_path / name, name, cls, author, profile, **over)


def restarts(store: RunStore) -> list[Any]:
    return [c for c in store.ledger.tool_calls() if c.tool == RESTART_TOOL]


def test_a_chapter_that_exhausts_its_turns_is_restarted_and_never_kept_degraded(tmp_path: Path) -> None:
    # chapter 2's try: a read of chapter 1, then three short drafts; the next try writes on target
    store = _run(tmp_path, "nst", NstConfig, Author(length=short_until(3)), max_turns=4)
    assert store.info().status == "completed"
    assert not any(c.degraded for c in store.chapters())
    (restart,) = restarts(store)
    assert restart.unit == 2 and restart.arguments == {"try": 1, "restarts": 3}
    assert "no draft passed the length gate in 4 turns" in (restart.error or "")
    default = _run(tmp_path / "default", "nst", NstConfig, Author(length=short_until(4)), "default", max_turns=4)
    assert [c.index for c in default.chapters() if c.degraded] == [2] and not restarts(default)  # fabula's rule


def test_a_chapter_that_fails_every_restart_fails_the_run_with_nothing_of_it_kept(tmp_path: Path) -> None:
    with pytest.raises(ChapterFailedError, match=r"chapter 2 failed 4 times .*fabula resume"):
        _run(tmp_path, "nst", NstConfig, Author(length=short_until(99)), max_turns=4)
    with RunStore.open(tmp_path / "nst", readonly=True) as store:
        assert store.info().status == "failed" and [c.index for c in store.chapters()] == [1]
        assert [c.arguments["try"] for c in restarts(store)] == [1, 2, 3, 4]


def test_rollsum_restarts_a_chapter_past_its_attempts(tmp_path: Path) -> None:
    author = Author(length=short_until(3, chapter=None))  # every chapter's first 3 drafts short (2 attempts a try)
    store = _run(tmp_path, "rollsum", RollSumConfig, author, chapter_attempts=2)
    assert store.info().status == "completed" and not any(c.degraded for c in store.chapters())
    assert [c.unit for c in restarts(store)] == [1, 2, 3]


def test_direct_under_paper_fails_instead_of_keeping_a_story_out_of_the_gate(tmp_path: Path) -> None:
    with pytest.raises(ChapterFailedError, match="chapter 1 failed 1 time "):
        _run(tmp_path, "direct", DirectConfig, Author(length=short_until(99, chapter=None)), attempts=2)
    with RunStore.open(tmp_path / "direct", readonly=True) as store:
        assert store.info().status == "failed" and not store.chapters()
