"""Sizing prose generations from the length gate (``agent.gate``) and a measured ratio.

To land in the gate at the first attempt, ``max_tokens`` and ``min_tokens`` are sized from the
range and a tokens-per-word ratio measured on the model's own drafts.
"""

from __future__ import annotations

import math

from agent.gate import Gate
from agent.limits import CJK_TOKENS_PER_WORD, LATIN_TOKENS_PER_WORD
from agent.llm.types import Completion
from agent.text import CJK_CHAR, count_words

RATIO_BOUNDS = (0.5, 4.0)
"""A measured ratio outside this is a broken reply, not a property of the model."""

__all__ = ["CJK_TOKENS_PER_WORD", "LATIN_TOKENS_PER_WORD", "Gate", "initial_ratio", "size_tokens", "update_ratio"]


def initial_ratio(sample: str, configured: float | None) -> float:
    """Tokens per word before anything is measured: configured, else by script of the prompt."""
    if configured:
        return float(configured)
    cjk = len(CJK_CHAR.findall(sample))
    return CJK_TOKENS_PER_WORD if cjk * 2 > count_words(sample) else LATIN_TOKENS_PER_WORD


def update_ratio(ratio: float, reply: Completion, *, weight: float = 0.5) -> float:
    """Blend one prose reply's tokens per word into the running ratio (ignores broken or tiny
    replies). Measured on the raw reply, which is what the tokens paid for, and on cut-off
    replies too: a draft cut short of the range means the ratio was too low, and the next
    draft must get more room."""
    words = count_words(reply.text)
    completion_tokens = reply.usage.completion_tokens
    if words < 20 or completion_tokens <= 0:
        return ratio
    measured = completion_tokens / words
    if not RATIO_BOUNDS[0] <= measured <= RATIO_BOUNDS[1]:
        return ratio
    return (1 - weight) * ratio + weight * measured


HEADROOM = 1.25
TRIM_HEADROOM = 1.05


def size_tokens(gate: Gate, ratio: float, *, cap: int, use_min: bool,
                trim: bool = False) -> tuple[int, int | None]:
    """``(max_tokens, min_tokens)`` for a prose reply aimed at ``gate``.

    The ceiling leaves 25% over the top of the range (a longer reply is rejected anyway, and a
    cut one always is); the floor asks for 90% of the bottom, so an under-estimated ratio
    cannot push a draft past the top. With trimming (``trim_cut_drafts``) the ceiling sits just
    over the top instead: a draft that would run long is cut there and trimmed back to its last
    sentence inside the range, rather than finishing too long and being rejected (the tiny
    model's chapter drafts ended at 999 and 735 words for ranges of 440-660 and 320-480).
    """
    headroom = TRIM_HEADROOM if trim else HEADROOM
    max_tokens = min(cap, math.ceil(gate.high * ratio * headroom) + 64)
    if not use_min:
        return max_tokens, None
    return max_tokens, max(0, min(max_tokens - 1, math.floor(gate.low * ratio * 0.9)))
