"""Logits processors for the llama.cpp engine, with transformers' semantics.

llama.cpp's own penalties look at the last 64 tokens and mix prompt and reply; the profiles were
tuned on transformers, whose repetition penalty covers the whole sequence and whose
``no_repeat_ngram_size`` has no llama.cpp twin, and OpenAI's frequency and presence penalties
count the reply only. These keep those meanings. Each processor is called with the scores of the
next token and told each sampled token (``accept``), so its state grows with the reply instead
of being rebuilt from the whole sequence at every step.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from agent.llm.sampling import Sampling


class Penalties:
    """Repetition penalty (whole sequence), ``no_repeat_ngram_size`` (whole sequence) and the
    frequency and presence penalties (the reply), in one pass per token."""

    def __init__(self, given: dict[str, Any], prompt: list[int]) -> None:
        self.repetition = float(given.get("repetition_penalty", 1.0))
        self.ngram = int(given.get("no_repeat_ngram_size", 0) or 0)
        self.frequency = float(given.get("frequency_penalty", 0.0))
        self.presence = float(given.get("presence_penalty", 0.0))
        self.sequence = list(prompt)
        self.seen = set(prompt)
        self.counts: dict[int, int] = defaultdict(int)
        self.followers: dict[tuple[int, ...], set[int]] = defaultdict(set)
        if self.ngram > 0:
            for i in range(len(prompt) - self.ngram + 1):
                self.followers[tuple(prompt[i : i + self.ngram - 1])].add(prompt[i + self.ngram - 1])

    @classmethod
    def of(cls, sampling: Sampling, *, sampled: bool, prompt: list[int]) -> Penalties | None:
        """The penalties ``sampling`` asks for (they act on greedy decoding too), or ``None``."""
        given = sampling.given()
        names = ("repetition_penalty", "no_repeat_ngram_size", "frequency_penalty", "presence_penalty")
        return cls(given, prompt) if any(n in given for n in names) else None

    def __call__(self, input_ids: Any, scores: np.ndarray) -> np.ndarray:
        if self.repetition != 1.0 and self.seen:
            ids = np.fromiter(self.seen, dtype=np.intp)
            ids = ids[ids < scores.shape[0]]
            picked = scores[ids]
            scores[ids] = np.where(picked > 0, picked / self.repetition, picked * self.repetition)
        if self.counts and (self.frequency or self.presence):
            ids = np.fromiter(self.counts.keys(), dtype=np.intp)
            counts = np.fromiter(self.counts.values(), dtype=np.float32)
            scores[ids] -= self.frequency * counts + self.presence
        if self.ngram > 0 and len(self.sequence) >= self.ngram - 1:
            banned = self.followers.get(tuple(self.sequence[len(self.sequence) - self.ngram + 1 :]))
            if banned:
                scores[np.fromiter(banned, dtype=np.intp)] = -np.inf
        return scores

    def accept(self, token: int) -> None:
        self.sequence.append(token)
        self.seen.add(token)
        self.counts[token] += 1
        if self.ngram > 0 and len(self.sequence) >= self.ngram:
            self.followers[tuple(self.sequence[-self.ngram : -1])].add(token)


class MinTokens:
    """No end of sequence before ``minimum`` reply tokens (``min_tokens``)."""

    def __init__(self, minimum: int, eos: int) -> None:
        self.minimum, self.eos, self.generated = minimum, eos, 0

    @classmethod
    def of(cls, minimum: int | None, eos: int) -> MinTokens | None:
        return cls(minimum, eos) if minimum else None

    def __call__(self, input_ids: Any, scores: np.ndarray) -> np.ndarray:
        if self.generated < self.minimum:
            scores[self.eos] = -np.inf
        return scores

    def accept(self, token: int) -> None:
        self.generated += 1


class GrammarMask:
    """An Outlines index as a token mask: every token the constraint does not allow next gets
    ``-inf`` (the mask is written by outlines-core as a bitmask and unpacked by numpy)."""

    def __init__(self, index: Any) -> None:
        from outlines_core import Guide

        self.guide = Guide(index)
        self._bits: np.ndarray | None = None

    def __call__(self, input_ids: Any, scores: np.ndarray) -> np.ndarray:
        size = scores.shape[0]
        if self._bits is None or self._bits.shape[0] * 32 < size:
            self._bits = np.zeros((size + 31) // 32, dtype=np.int32)
        self.guide.write_mask_into(self._bits.ctypes.data, self._bits.shape[0], 4)
        allowed = np.unpackbits(self._bits.view(np.uint8), bitorder="little")[:size].astype(bool)
        scores[~allowed] = -np.inf
        return scores

    def accept(self, token: int) -> None:
        self.guide.advance(token, return_tokens=False)
