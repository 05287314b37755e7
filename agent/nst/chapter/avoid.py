"""The book's own worst offenders (``fabula lint``) named as "avoid" in the writer's chapter prompt.

A setting of the run (the plan record ``LINT_AVOID_KEY``, set by ``--lint-avoid``), honoured under the default
profile only: the ``paper`` profile reproduces the papers' prompts word for word, and a small model's
prompt is kept short. The list is the lint's stock phrases and overused words of the chapters written so
far, most frequent first (``agent.lint.report.BookReport.worst_offenders``).
"""

from __future__ import annotations

from typing import Any

from agent.errors import InputError
from agent.lint import lint_book
from agent.store import RunStore

LINT_AVOID_KEY = "lint_avoid"
AVOID_LIMIT = 8


def check_profile(profile: str | None) -> None:
    if (profile or "default") != "default":
        raise InputError(f"--lint-avoid changes the writer's prompt; it is for the default profile, not {profile}")


def avoid_list(store: RunStore, config: Any, index: int) -> list[str]:
    """What chapter ``index``'s prompt asks to avoid (empty: the setting is off, or nothing to avoid)."""
    if not store.plans.get(LINT_AVOID_KEY) or getattr(config, "profile", "default") != "default" or index <= 1:
        return []
    earlier = [(c.title, c.text) for c in store.chapters() if c.index < index]
    return lint_book(earlier).worst_offenders(AVOID_LIMIT) if earlier else []
