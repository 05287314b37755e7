"""Terminal windows (NstAgent 3.3, A.1): which trailing chapters the judge enumerates errors in.

The paper marks every chapter at 10K words and the last 7, 5 and 4 chapters at 20K, 50K and
100K (10, 15, 25 and 40 chapters), so the window stays near 10K words at every length. The
rule in between, ours: the chapter count ``k`` is interpolated linearly in target words
between the anchors (10K→10, 20K→7, 50K→5, 100K→4) and rounded half up; at or below 10K every
chapter is in scope; above 100K ``k`` stays 4. ``k`` never exceeds the number of sections.
Two overrides exist for the paper's RollSum exception (matching checked words): a fixed
``chapters`` count, or ``min_words`` (the fewest trailing chapters spanning at least that
many words).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any

from agent.eval.story import Story

ANCHORS: tuple[tuple[int, int], ...] = ((10_000, 10), (20_000, 7), (50_000, 5), (100_000, 4))
ALL_IN_SCOPE_AT = 10_000


@dataclass(frozen=True)
class Window:
    k: int
    first: int
    """Index (1-based position in the story's sections) of the first section in scope."""
    checked_words: int
    prefix_words: int
    total_words: int
    rule: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def anchor_k(target_words: int) -> int | None:
    """Chapters in scope for a target length; ``None`` means every chapter."""
    if target_words <= ALL_IN_SCOPE_AT:
        return None
    for (w0, k0), (w1, k1) in itertools.pairwise(ANCHORS):
        if target_words <= w1:
            value = k0 + (k1 - k0) * (target_words - w0) / (w1 - w0)
            return math.floor(value + 0.5)
    return ANCHORS[-1][1]


def choose_window(story: Story, *, chapters: int | None = None, min_words: int | None = None) -> Window:
    n = len(story.sections)
    if n == 0:
        raise ValueError(f"{story.run_dir}: the story has no text to judge")
    words = [s.words for s in story.sections]
    if chapters is not None:
        if chapters < 1:
            raise ValueError("--window-chapters must be at least 1")
        k, rule = min(chapters, n), f"fixed: last {chapters} chapters"
    elif min_words is not None:
        k, total = 0, 0
        while k < n and total < min_words:
            k += 1
            total += words[n - k]
        rule = f"fewest trailing chapters spanning at least {min_words} words"
    else:
        target = story.target_words or story.words
        anchored = anchor_k(target)
        k = n if anchored is None else min(anchored, n)
        rule = f"target {target} words: " + ("every chapter" if anchored is None else f"last {anchored} chapters")
    first = n - k + 1
    checked = sum(words[first - 1 :])
    return Window(k, first, checked, sum(words) - checked, sum(words), rule)
