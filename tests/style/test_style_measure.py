"""The model-free style measure on real public-domain prose (small excerpts shipped as fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.style.delta import DRIFT_THRESHOLD, StyleProfile, profile
from agent.style.features import measure

FIXTURES = Path(__file__).parent.parent / "fixtures" / "style"


def _text(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text(encoding="utf-8")


def test_a_later_austen_chapter_sits_nearer_austens_sample_than_doyles() -> None:
    austen, doyle = profile(_text("austen_sample")), profile(_text("doyle_sample"))
    chapter = _text("austen_chapter")
    assert austen.distance(chapter).total < doyle.distance(chapter).total


def test_a_later_doyle_story_sits_nearer_doyles_sample_than_austens() -> None:
    austen, doyle = profile(_text("austen_sample")), profile(_text("doyle_sample"))
    chapter = _text("doyle_chapter")
    assert doyle.distance(chapter).total < austen.distance(chapter).total


def test_the_sample_itself_is_close_and_not_flagged() -> None:
    sample = _text("austen_sample")
    assert profile(sample).distance(sample).total < DRIFT_THRESHOLD / 2


def test_prose_far_from_the_sample_is_flagged_as_drift() -> None:
    shouting = "\n\n".join(
        f"“Run! Now! Go, go, go!” I yell at you; you run — I run — we run! Number {i}!" for i in range(200)
    )
    far = profile(_text("austen_sample")).distance(shouting)
    assert far.drifted and far.total > DRIFT_THRESHOLD


def test_watson_narrates_in_the_first_person_and_austen_in_the_third_both_in_the_past() -> None:
    watson, austen = measure(_text("doyle_sample")), measure(_text("austen_sample"))
    assert (watson.person, austen.person) == ("first", "third")
    assert watson.tense == austen.tense == "past"
    assert 0.1 < austen.dialogue_share < 0.9


def test_a_profile_survives_its_json_round_trip() -> None:
    made = profile(_text("doyle_sample"))
    again = StyleProfile.from_dict(made.to_dict())
    chapter = _text("doyle_chapter")
    assert again.distance(chapter) == made.distance(chapter)


def test_a_sample_too_short_to_measure_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="at least"):
        profile("Too short a sample.")


def test_chinese_prose_is_measured_by_its_characters() -> None:
    text = "\n\n".join("他走进了房间，看见她坐在窗前。“你来了？”她说。我们都没有说话。" for _ in range(80))
    features = measure(text)
    assert features.words > 1000 and features.dialogue_share > 0
    assert "的" in profile(text + "的").words or "了" in profile(text).words


def test_the_exemplars_are_the_sample_passages_that_fit_the_chapters_outline_item() -> None:
    from agent.style.guide import best_passages, passages, prompt_block

    pool = passages(_text("austen_sample"))
    assert len(pool) >= 6
    chosen = best_passages("Mrs. Bennet and the ball at Netherfield", pool, k=2)
    assert len(chosen) == 2 and all("Netherfield" in p or "ball" in p for p in chosen)
    block = prompt_block(
        {"card": "- Narration: third person, past tense.", "passages": pool},
        {"title": "The assembly", "description": "Bingley dances at the ball."},
    )
    assert block.startswith("# Style") and block.count("## Example passage") == 3
