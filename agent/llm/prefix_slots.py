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

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass(eq=False)
class SavedCache:
    """One saved KV cache: the tokens it holds and llama.cpp's state bytes (KV cells in use,
    the RNG, the last logits). llama-cpp-python's own ``save_state`` also copies its 512-row
    scores buffer (96 MiB on a 49K vocabulary) every time; this keeps only what a reuse needs."""

    tokens: np.ndarray
    data: Any
    size: int
    # eq=False: saved caches are told apart by identity (comparing token arrays of different
    # lengths raised in list.remove on the CI run)


def save_cache(llama: Any) -> SavedCache:
    import llama_cpp

    ctx = llama._ctx.ctx
    capacity = int(llama_cpp.llama_state_get_size(ctx))
    data = (ctypes.c_uint8 * capacity)()
    size = int(llama_cpp.llama_state_get_data(ctx, data, capacity))
    return SavedCache(llama.input_ids[: llama.n_tokens].copy(), data, size)


def load_cache(llama: Any, saved: SavedCache) -> None:
    """Make ``saved`` the live cache; the next ``generate`` evaluates at least one token again
    (``_requires_eval``), so no logits from before the switch are sampled."""
    import llama_cpp

    if int(llama_cpp.llama_state_set_data(llama._ctx.ctx, saved.data, saved.size)) != saved.size:
        llama.reset()
        return
    count = len(saved.tokens)
    llama.input_ids[:count] = saved.tokens
    llama.n_tokens = count
    llama._requires_eval = True


class PrefixSlots:
    """The saved caches of one ``llama_cpp.Llama`` (most recently used last)."""

    def __init__(self, llama: Any, *, budget_mib: float = PREFIX_CACHE_MIB) -> None:
        self.llama = llama
        self.budget = int(budget_mib * 2**20)
        self.saved: list[SavedCache] = []
        self.loads = 0

    def prepare(self, prompt: Sequence[int]) -> int:
        """Make the live cache the one that shares most with ``prompt``; returns how many of the
        prompt's tokens it holds (what ``generate`` will not recompute: one less than the whole
        prompt when it holds all of it, since the last position's logits are needed)."""
        ids = np.asarray(prompt, dtype=np.intc)
        live = self._live_common(ids)
        best, best_common = None, live
        for state in self.saved:
            shared = common_prefix(state.tokens, ids)
            if shared > best_common:
                best, best_common = state, shared
        if best is not None and best_common - live >= MIN_SAVED_TOKENS // 4:
            self.saved.remove(best)  # by identity (eq=False): it becomes the live cache
            self._save_live(ids, live)
            load_cache(self.llama, best)
            live = self._live_common(ids)
            self.loads += 1
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
        state = save_cache(self.llama)
        if state.size > self.budget // 2:
            return
        self.saved = [
            s for s in self.saved if common_prefix(s.tokens, state.tokens) < len(s.tokens)
        ]  # a prefix of it: subsumed
        self.saved.append(state)
        while sum(s.size for s in self.saved) > self.budget:
            self.saved.pop(0)

    def clear(self) -> None:
        self.saved.clear()
