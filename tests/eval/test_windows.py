"""Window placement against hand-computed examples (NstAgent A.1 anchors and our rule between)."""

from __future__ import annotations

import pytest

from agent.eval.consistency import MARKER, render_story
from agent.eval.story import Section, Story
from agent.eval.windows import anchor_k, choose_window


def story(word_counts: list[int], target: int | None) -> Story:
    sections = [Section(i, f"T{i}", " ".join(["w"] * n), n) for i, n in enumerate(word_counts, start=1)]
    return Story("/x", "nst", sections, "p", "id:1", target)


@pytest.mark.parametrize(
    ("target", "k"),
    [
        (5_000, None),
        (10_000, None),
        (20_000, 7),
        (50_000, 5),
        (100_000, 4),
        (15_000, 9),
        (12_000, 9),
        (35_000, 6),
        (75_000, 5),
        (90_000, 4),
        (250_000, 4),
    ],
)
def test_anchor_k(target, k):
    # 15K: 10 + (7-10)*0.5 = 8.5 -> 9 (half up); 12K: 9.4 -> 9; 35K: 6; 75K: 4.5 -> 5; 90K: 4.2 -> 4.
    assert anchor_k(target) == k


def test_every_chapter_in_scope_at_10k():
    w = choose_window(story([1000] * 10, 10_000))
    assert (w.k, w.first, w.checked_words, w.prefix_words) == (10, 1, 10_000, 0)


def test_last_seven_at_20k():
    counts = [1000 + 10 * i for i in range(15)]  # 1000, 1010, ..., 1140
    w = choose_window(story(counts, 20_000))
    assert (w.k, w.first) == (7, 9)
    assert w.checked_words == sum(counts[8:]) == 7 * 1000 + 10 * sum(range(8, 15))
    assert w.prefix_words == sum(counts[:8])


def test_window_never_exceeds_the_story_and_overrides():
    assert choose_window(story([500] * 3, 100_000)).k == 3
    assert choose_window(story([500] * 6, 100_000), chapters=2).first == 5
    # fewest trailing chapters spanning 1,200 words: 300 + 400 + 600 = 1,300 (3 chapters)
    w = choose_window(story([900, 600, 400, 300], None), min_words=1200)
    assert (w.k, w.first, w.checked_words) == (3, 2, 1300)


def test_marker_stands_before_the_first_chapter_in_scope():
    s = story([10] * 5, 50_000)
    w = choose_window(s, chapters=2)
    rendered = render_story(s, w)
    assert rendered.count(MARKER) == 1
    assert rendered.index("[Chapter 3: T3]") < rendered.index(MARKER) < rendered.index("[Chapter 4: T4]")
    # at 10K the marker still stands, before chapter 1 (the paper marks every chapter)
    full = render_story(s, choose_window(story([10] * 5, 10_000)))
    assert full.startswith(MARKER)
