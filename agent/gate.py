"""The length gate, once: a unit of prose is accepted only within ±20 % of its target.

NstAgent (Appendix A.1) accepts a chapter, and Direct a whole story, only inside
``[ceil(low * target), floor(high * target)]`` words under ``agent.text.count_words``, and
never a reply cut at ``max_tokens``. The planner's chapter targets must sum to within the same
bounds of the story's length, and the evaluation scores compliance with the same rule. Every
one of them reads it from here, with the run's ``gate_low``/``gate_high``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_LOW = 0.8
DEFAULT_HIGH = 1.2


@dataclass(frozen=True)
class Gate:
    """The accepted word range for one target."""

    target: int
    low: int
    high: int

    @classmethod
    def for_target(cls, target: int, low: float = DEFAULT_LOW, high: float = DEFAULT_HIGH) -> Gate:
        return cls(target, *bounds(target, low, high))

    def distance(self, words: int) -> int:
        """Words outside the range (0 inside it)."""
        return self.low - words if words < self.low else max(0, words - self.high)

    def accepts(self, words: int, truncated: bool = False) -> bool:
        return not truncated and self.low <= words <= self.high

    def describe(self) -> str:
        return f"target {self.target} words, accepted range {self.low}-{self.high}"

    def feedback(self, words: int, truncated: bool = False) -> str:
        """What a rejected draft is told: count, target, range and deviation."""
        deviation = words - self.target
        pct = 100.0 * deviation / self.target if self.target else 0.0
        head = (
            f"REJECTED: the reply stopped at the output-token limit (cut off) after {words} words. "
            if truncated
            else f"REJECTED: {words} words. "
        )
        if truncated:
            advice = "Write a complete chapter that ends properly and stays inside the range."
        elif words < self.low:
            advice = f"Too short by {self.low - words} words: write a longer, complete version."
        else:
            advice = f"Too long by {words - self.high} words: write a shorter, complete version."
        return f"{head}{self.describe()}; deviation {deviation:+d} words ({pct:+.0f}%). {advice}"


def bounds(target: float, low: float = DEFAULT_LOW, high: float = DEFAULT_HIGH) -> tuple[int, int]:
    """The accepted word range around a target (which may be a share, e.g. words per chapter)."""
    return math.ceil(low * target), math.floor(high * target)


def in_gate(words: int, target: int, low: float = DEFAULT_LOW, high: float = DEFAULT_HIGH) -> bool:
    """True when ``words`` lies inside the gate around ``target`` (no truncation involved)."""
    return Gate.for_target(target, low, high).accepts(words)
