"""The reference's budgets under ``paper`` (issue 33): the dynamic per-call budget of NstAgent and RollSum
(README.md:75-76, :90-91: ``--max-tokens 32768 --chapter-token-control dynamic --dynamic-token-overhead 1536``),
RollSum's growth after a cut draft (rolling_summary.py ``next_dynamic_token_budget``) and no summary after
the last chapter (rolling_summary.py:958-971)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.llm.base import Request
from agent.nst.chapter.sizing import grown_budget, reference_budget
from agent.nst.config import NstConfig, RollSumConfig
from agent.testing.author import Author, chapter_of, gate_of
from tests.nst.profile_runs import written


def test_the_budget_is_the_references_formula() -> None:
    assert reference_budget(1000, 1536, 32768, cjk=False) == 2886  # ceil(1.35 x 1000 + 1536)
    assert reference_budget(1000, 1536, 32768, cjk=True) == 2386  # 0.85 per CJK character
    assert reference_budget(100, 0, 32768, cjk=False) == 1024  # the floor
    assert reference_budget(30_000, 1536, 32768, cjk=False) == 32768  # the ceiling
    assert reference_budget(1000, 1536, 2048, cjk=False) == 2048  # a lower ceiling is kept


def test_a_cut_budget_grows_by_half_or_1024_up_to_the_ceiling() -> None:
    assert grown_budget(2886, 32768) == 4329
    assert grown_budget(1024, 32768) == 2048
    assert grown_budget(30_000, 32768) == 32768


def _run(tmp_path: Path, name: str, cls: type, author: Author, **over: Any) -> Any:
    return written(tmp_path / name, name, cls, author, **over)


def test_every_nst_chapter_call_gets_the_budget_of_its_chapter_under_paper(tmp_path: Path) -> None:
    author = Author()
    store = _run(tmp_path, "nst", NstConfig, author)
    targets = [c["target_words"] for c in store.plans.all()["outline"]]
    chapter_calls = [r for r in author.requests if r.role in ("nst_turn", "nst_prose")]
    expected = {reference_budget(t, 1536, 32768, cjk=False) for t in targets}
    assert chapter_calls and {r.max_tokens for r in chapter_calls} == expected
    off = Author()
    _run(tmp_path / "off", "nst", NstConfig, off, turn_token_overhead=None)
    assert {r.max_tokens for r in off.requests if r.role in ("nst_turn", "nst_prose")} == {32768}


def test_rollsum_grows_the_budget_after_a_cut_draft_and_skips_the_last_summary(tmp_path: Path) -> None:
    drafted: set[int] = set()

    def length(request: Request, attempt: int) -> int | tuple[int, str]:
        target, chapter = gate_of(request)[0], chapter_of(request)
        first = chapter not in drafted
        drafted.add(chapter)
        return (int(target * 0.6), "length") if first else target  # each chapter's first draft is cut short

    author = Author(length=length)
    store = _run(tmp_path, "rollsum", RollSumConfig, author)
    assert store.info().status == "completed"
    drafts = [r.max_tokens for r in author.requests if r.role == "rollsum_chapter"]
    first = reference_budget(1000, 1536, 32768, cjk=False)
    assert drafts[:2] == [first, grown_budget(first, 32768)]  # cut at 2886: the retry gets 4329
    chapters = len(store.chapters())
    assert [r.role for r in author.requests].count("rollsum_summary") == chapters - 1  # none after the last
