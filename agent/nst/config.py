"""Every setting of the NstAgent pipeline and its baselines, with the paper's defaults.

The whole dictionary is stored (and fingerprinted) with the run, so a resume with different
settings is refused unless forced, and every figure can be traced to the settings behind it.
"""

from __future__ import annotations

from typing import Any

PLANNER_VERSION = "1"

NST_DEFAULTS: dict[str, Any] = {
    "temperature": 0.7,
    "state": True,  # --no-state: no state, no update tool, no state guidance
    "lookback": True,  # --no-lookback: no read, search or correct
    "max_turns": 50,
    "read_budget": 3,
    "search_budget": 5,
    "search_hits": 8,
    "correct_budget": 3,
    "gate_low": 0.8,
    "gate_high": 1.2,
    "tokens_per_word": None,  # initial estimate; None: 1.4 (Latin) or 1.5 (CJK), then measured
    "min_tokens": True,  # ask the backend for a floor on prose tokens sized from the gate
    "tool_max_tokens": 512,
    "update_max_tokens": 4096,
    "outline_attempts": 3,
    "plan_cache": None,  # folder; None: $FABULA_HOME/plans
    "planner_max_tokens": 2048,
    "prose_max_tokens_cap": 32768,
}

ROLLSUM_DEFAULTS: dict[str, Any] = {
    "temperature": 0.7,
    "gate_low": 0.8,
    "gate_high": 1.2,
    "chapter_attempts": 5,
    "tokens_per_word": None,
    "min_tokens": True,
    "summary_max_tokens": 16384,
    "outline_attempts": 3,
    "plan_cache": None,
    "planner_max_tokens": 2048,
    "prose_max_tokens_cap": 32768,
}

DIRECT_DEFAULTS: dict[str, Any] = {
    "temperature": 0.7,
    "gate_low": 0.8,
    "gate_high": 1.2,
    "attempts": 3,
    "tokens_per_word": None,
    "min_tokens": True,
    "prose_max_tokens_cap": 32768,
}

MIN_WORDS = 500
MAX_WORDS = 300_000
