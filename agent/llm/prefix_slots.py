"""Saved KV caches of earlier prompts, so the llama.cpp engine reuses a prefix across calls that
interleave (the in-process counterpart of vLLM's prefix cache).

llama.cpp keeps one live KV cache: a call reuses what it shares with the call just before.
Pipelines interleave conversations (NstAgent's tool loop, then the prose call with its own
system prompt, then the loop again; Magnet's roles in turn), so a single cache would be thrown
away at every switch. Before a call, the live cache is saved when the new prompt would overwrite
a long part of it, and a saved cache that shares more with the new prompt is loaded instead; the
oldest are dropped past a memory budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

PREFIX_CACHE_MIB = 1024
"""The memory the saved caches may take (SmolLM2-135M holds ~23 KB a token: 4 conversations of
10K tokens; a 4B model's 8K-token cache is ~1.2 GB and is not kept)."""
MIN_SAVED_TOKENS = 256
"""A cache shorter than this is cheaper to recompute than to copy out and back."""


def common_prefix(held: np.ndarray, prompt: np.ndarray) -> int:
    """How many leading tokens ``held`` and ``prompt`` share."""
    n = min(len(held), len(prompt))
    differ = np.flatnonzero(held[:n] != prompt[:n])
    return int(differ[0]) if differ.size else n


class PrefixSlots:
    """The saved caches of one ``llama_cpp.Llama`` (most recently used last)."""

    def __init__(self, llama: Any, *, budget_mib: float = PREFIX_CACHE_MIB) -> None:
        self.llama = llama
        self.budget = int(budget_mib * 2**20)
        self.saved: list[Any] = []
        self.loads = 0

    def prepare(self, prompt: Sequence[int]) -> int:
        """Make the live cache the one that shares most with ``prompt``; returns how many of the
        prompt's tokens it holds (what ``generate`` will not recompute: one less than the whole
        prompt when it holds all of it, since the last position's logits are needed)."""
        ids = np.asarray(prompt, dtype=np.intc)
        live = self._live_common(ids)
        best, best_common = None, live
        for state in self.saved:
            shared = common_prefix(state.input_ids[:state.n_tokens], ids)
            if shared > best_common:
                best, best_common = state, shared
        if best is not None and best_common - live >= MIN_SAVED_TOKENS // 4:
            self._save_live(ids, live)
            self.saved.remove(best)
            self.llama.load_state(best)
            self.loads += 1
            live = best_common
        else:
            self._save_live(ids, live)
        return live - 1 if live == len(ids) else live

    def _live_common(self, ids: np.ndarray) -> int:
        held = self.llama.n_tokens
        return common_prefix(self.llama.input_ids[:held], ids) if held else 0

    def _save_live(self, ids: np.ndarray, shared: int) -> None:
        """Keep the live cache when this call would overwrite a long part of it."""
        if self.llama.n_tokens - shared < MIN_SAVED_TOKENS:
            return
        state = self.llama.save_state()
        if state.llama_state_size > self.budget // 2:
            return
        held = state.input_ids[:state.n_tokens]
        self.saved = [s for s in self.saved
                      if common_prefix(s.input_ids[:s.n_tokens], held) < s.n_tokens]  # a prefix of it: subsumed
        self.saved.append(state)
        while sum(s.llama_state_size for s in self.saved) > self.budget:
            self.saved.pop(0)

    def clear(self) -> None:
        self.saved.clear()
