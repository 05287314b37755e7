"""Every request of the NstAgent family fits its context before it is sent (issue 13).

The budget itself is shared with Magnet and lives in ``agent.llm.budget``; this module gives the
family its run's budget from its settings. Every call the family makes (planner stages, chapter
turns, prose drafts, updates and their fallbacks, digests, RollSum's chapters and summaries,
Direct's story) goes through :meth:`Budget.generate`; each step that gives way is a ``budget``
row of the run's tool ledger.
"""

from __future__ import annotations

from typing import Any

from agent.llm.budget import (
    SERVER_RETRIES,
    Budget,
    ContextExceededError,
    Recorder,
    Shrink,
    ledger_recorder,
    open_budget,
)
from agent.llm.budget import run_budget as _run_budget

__all__ = ["SERVER_RETRIES", "Budget", "ContextExceededError", "Recorder", "Shrink", "ledger_recorder",
           "open_budget", "run_budget"]


def run_budget(ctx: Any) -> Budget:
    """The budget of a NstAgent-family run (``ctx``: a ``RunContext`` whose config is a
    ``StoryTarget``): context from the setting, server or model; facts in the plan table;
    actions in the ledger."""
    return _run_budget(ctx, ctx.config.context_tokens, ctx.config.context_reserve)
