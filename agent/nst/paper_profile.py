"""The ``paper`` profile of the NstAgent pipeline and its baselines: each bundle names the settings whose
paper value differs from fabula's default, with where the paper or the reference gives it.

Kept apart from ``agent.nst.config`` (the settings themselves) so that each module stays one screenful
of one job; the values are checked by the settings' types when a run is configured.
"""

from __future__ import annotations

from typing import Any

PAPER_STORY: dict[str, Any] = {
    "min_tokens": False,
    "repetition_guard": False,
    "trim_cut_drafts": False,
    "chapter_restarts": 3,
}
"""The ``paper`` profile of every chapter-based method: no prose floor (NstAgent App. A.1, line 401 of
the seed: every method rejects a reply at its token limit, none asks for a minimum), no repetition guard,
no degraded chapter kept (a failed chapter restarts from its checkpoint, README.md:78 ``--auto-resumes 3``)."""
PAPER_PLANNER: dict[str, Any] = {
    "planner_max_tokens": 32768,
    "outline_attempts": 5,
    "turn_token_overhead": 1536,
    "premise_from": 10_000,
    "synopsis_from": 20_000,
    "acts_from": 100_000,
    "synopsis_words": True,
    "free_outline": True,
    "outline_style": "reference",
}
"""The reference planner (zhennan1/NstAgent code/agent/agent_core.py) as its published commands run it:
32,768 tokens for every stage (README.md:68), 5 attempts at the outline (``MAX_JSON_RETRIES``, line 59), the
dynamic chapter budget (README.md:75-76, :90-91); ``stage_count_for_words``: the chapter outline alone
below 10K, the premise from 10K, the synopsis (~1,000 words, ~2,500 with acts) from 20K, the acts from 100K; the chapter
outline's count "approximately" the anchors (rounded up) and each chapter's words "up to you", asked for as a JSON
array from 0 with no book title and read from a free reply (``outline_chapters_prompt``, ``_chat_json``)."""
PAPER_NST: dict[str, Any] = {
    **PAPER_STORY,
    **PAPER_PLANNER,
    "prose_max_tokens": 32768,
    "tool_max_tokens": 32768,
    "update_max_tokens": 32768,
    "evidence": False,
    "atomic_update": True,
    "fallback_update": False,
    "required_after_failures": False,
    "state_share": 1.0,
    "min_past_events": 0,
    "failed_update_limit": 0,
    "search_style": "reference",
    "terminal_punctuation": True,
    "state_style": "reference",
    "retry_feedback": "reference",
    "tool_protocol": "native",
}
"""NstAgent as the paper: the published command's 32,768-token ceiling for every call of the chapter loop,
under which each gets min(32768, max(1024, ceil(1.35 x target + 1536))) (README.md:75-76), Eq. 6's atomic update
with no evidence and no second call (Section 4.3), no update past the 50-turn cap, every tool on offer
whatever failed, the state whole unless the chapter's request would not fit, and the reference's search
(``ChapterSearchIndex``: its tokens, ranking, tie order and JSON hits)."""
PAPER_ROLLSUM: dict[str, Any] = {
    **PAPER_STORY,
    **PAPER_PLANNER,
    "prose_max_tokens": 32768,
    "summary_max_tokens": 16384,
    "reference_prompts": True,
}
"""RollSum (App. A.1): "a 32,768-token limit per chapter call", "each summary call has a 16,384-token
output limit" (the reference's published command sizes the chapter call per chapter: docs/profiles.md)."""
PAPER_DIRECT: dict[str, Any] = {
    **PAPER_STORY,
    "prose_max_tokens": 32768,
    "chapter_restarts": 0,
    "reference_prompts": True,
}
"""Direct (App. A.1): "one full-story call per attempt with a 32,768-token output limit"."""
