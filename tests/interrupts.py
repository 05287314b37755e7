"""Ctrl-C inside a decode on the embedded engines: the sampling penalties' ``accept`` raises
``KeyboardInterrupt`` at a chosen token, where a user's Ctrl-C would land (between two tokens)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from agent.llm import local_sampling
from agent.llm.sampling import Sampling

FOX = [{"role": "user", "content": "Tell me a story about a fox."}]
FIRM = Sampling(repetition_penalty=1.1)
"""A penalty, so the interrupted processor runs on every token."""


@contextmanager
def ctrl_c_at_token(monkeypatch: pytest.MonkeyPatch, count: int) -> Iterator[None]:
    """The block must end in ``KeyboardInterrupt``, raised when its ``count``-th token is accepted;
    the penalties are themselves again afterwards."""
    accept = local_sampling.Penalties.accept
    seen: list[int] = []

    def interrupt(self: local_sampling.Penalties, token: int) -> None:
        seen.append(token)
        if len(seen) == count:
            raise KeyboardInterrupt
        accept(self, token)

    monkeypatch.setattr(local_sampling.Penalties, "accept", interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            yield
    finally:
        monkeypatch.setattr(local_sampling.Penalties, "accept", accept)
