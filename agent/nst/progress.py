"""Progress events from the pipelines to whoever displays them (the CLI), without an import of it.

A pipeline is started through the registry, which passes no callback; listeners registered
here receive every event (a dict: chapter, chapters, turn, attempts, tokens, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Listener = Callable[[dict[str, Any]], None]
LISTENERS: list[Listener] = []


def emit(event: dict[str, Any]) -> None:
    for listener in list(LISTENERS):
        listener(event)
