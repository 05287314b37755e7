"""Ending control: steer to a concluding goal as the target length nears, stop at the target.

The story must end as a story, not mid-scene. When about ``settings.ending_paragraphs``
paragraphs' worth of words remain, the goal generator is asked for a concluding goal (with
goal sequencing ablated, only the narrator is told). Once that goal is reached, or when
the next paragraph is likely to reach the target, the narrator is told to write the final
paragraph; the run stops when the target is reached or right after that final paragraph.

This module is the one stopping rule of Magnet and of its single-model baseline: the words
still missing (:func:`remaining`), the ending window, the final paragraph and the stop.
"""

from __future__ import annotations

from typing import Any

from agent.limits import CLOSING_TOKENS_PER_WORD
from agent.magnet.definition import StoryDefinition
from agent.magnet.settings import MagnetSettings


def paragraph_words(settings: MagnetSettings, state: dict[str, Any]) -> float:
    """Average words per narrated paragraph so far; before the first, the words a paragraph of
    ``settings.paragraph_tokens`` holds, so a story that fits in one paragraph closes in it."""
    steps = state.get("narrations", 0)
    return state.get("narration_words", 0) / steps if steps else settings.paragraph_tokens / CLOSING_TOKENS_PER_WORD


def remaining(story: StoryDefinition, state: dict[str, Any]) -> int:
    """Words still missing to the story's target (negative past it)."""
    return story.target_words - state["words"]


def in_ending_window(story: StoryDefinition, settings: MagnetSettings, state: dict[str, Any]) -> bool:
    """The remaining words fit in ``settings.ending_paragraphs`` paragraphs."""
    return remaining(story, state) <= settings.ending_paragraphs * paragraph_words(settings, state)


def should_conclude(story: StoryDefinition, settings: MagnetSettings, state: dict[str, Any]) -> bool:
    """True once, when the remaining words fit in the ending window."""
    if state.get("ending"):
        return False
    return in_ending_window(story, settings, state)


def is_final_paragraph(story: StoryDefinition, settings: MagnetSettings, state: dict[str, Any]) -> bool:
    """The next narration should close the story."""
    if state.get("final_next"):
        return True
    return remaining(story, state) <= paragraph_words(settings, state)


def stop_reason(story: StoryDefinition, state: dict[str, Any], final_paragraph: bool) -> str | None:
    """Why the story stops after this step (None: it goes on): its final paragraph is written, or
    the target length is reached."""
    if final_paragraph:
        return "final paragraph written"
    if state["words"] >= story.target_words:
        return "target length reached"
    return None


def cue(story: StoryDefinition, settings: MagnetSettings, state: dict[str, Any]) -> str:
    """What the prompts say about the ending ("" far from it)."""
    left = max(0, remaining(story, state))
    if is_final_paragraph(story, settings, state):
        return (
            "This is the final paragraph of the story: resolve the current goal and bring the whole story to a "
            "satisfying close. Do not open new threads."
        )
    if state.get("ending"):
        return (
            f"The story is nearing its end (about {left} words remain): move toward resolving the "
            "main conflict; do not open new threads."
        )
    return ""


def max_steps(story: StoryDefinition, settings: MagnetSettings) -> int:
    """The hard bound on timesteps (a run that hits it stops and says so)."""
    return max(4, int(settings.max_steps_factor * story.target_words / max(1, settings.paragraph_min_tokens)))


def close_after_words(story: StoryDefinition, settings: MagnetSettings, state: dict[str, Any]) -> int | None:
    """The words after which the closing paragraph ends at a sentence end (the words still missing,
    at least one) under ``settings.close_at_length``; ``None``: it is not cut."""
    return max(1, remaining(story, state)) if settings.close_at_length else None


def final_budget(story: StoryDefinition, settings: MagnetSettings, state: dict[str, Any]) -> tuple[int, int]:
    """``(min_tokens, max_tokens)`` of the closing paragraph, sized to the words still missing
    (bounded at three ordinary paragraphs), so the story reaches its target as it ends. Both are sizes of the
    answer, from ``paragraph_tokens``: the call's ceiling adds ``reasoning_tokens`` to the second
    (``MagnetSettings.ceiling``), which never grows the paragraph asked for."""
    want = int(max(0, remaining(story, state)) * CLOSING_TOKENS_PER_WORD)
    cap = 3 * settings.paragraph_tokens
    low = min(max(settings.paragraph_min_tokens, want), cap - 60)
    return low, min(cap, max(settings.paragraph_tokens, low + 80))
