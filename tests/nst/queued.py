"""Scripted models handed to the CLI in order, for tests that drive real commands."""

from __future__ import annotations

from typing import Any

from agent.testing.author import Author


class QueuedModels:
    """What ``LLMOptions.open`` hands out to the CLI, in order (a fresh default :class:`Author` when
    none is queued); every model records into the run's ledger through the run context. Shared by
    the edit and derive tests, which drive real commands with scripted models."""

    def __init__(self, monkeypatch: Any) -> None:
        from agent import pipelines

        self.queue: list[Author] = []
        self.opened: list[Author] = []
        monkeypatch.setattr(pipelines.LLMOptions, "open", self.open)

    def open(self, *args: Any, **kw: Any) -> Author:
        model = self.queue.pop(0) if self.queue else Author()
        self.opened.append(model)
        return model
