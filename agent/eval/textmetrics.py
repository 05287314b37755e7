"""Model-free metrics of a stored run: no judge, computed from the store alone.

Length-gate compliance (the shared +-20% gate of NstAgent A.1, per chapter against the
outline's targets, or per story for single-call methods and Magnet), degraded chapters,
lexical diversity (distinct-n) and repetition (repeated 4-gram rate), requirements opened
and resolved over the state history, state size per unit, and generation tokens per 1K
words with the cached share of prompt tokens.
"""

from __future__ import annotations

import json
from typing import Any

from agent.eval.story import Story, load_story
from agent.gate import DEFAULT_HIGH, DEFAULT_LOW, in_gate
from agent.repetition import distinct_n, repeated_ngram_rate, tokens
from agent.store import RunStore
from agent.store.snapshots import ChapterSnapshot


def _outline_targets(plan: dict[str, Any]) -> list[int]:
    outline = plan.get("outline")
    if isinstance(outline, dict):
        outline = outline.get("chapters")
    if not isinstance(outline, list):
        return []
    return [int(c["target_words"]) for c in outline if isinstance(c, dict) and c.get("target_words")]


def gate_compliance(store: RunStore, story: Story) -> dict[str, Any]:
    config = store.info().config
    low, high = float(config.get("gate_low", DEFAULT_LOW)), float(config.get("gate_high", DEFAULT_HIGH))
    targets = _outline_targets(store.plans.all())
    if targets and len(story.sections) > 1:
        checked = [(s.words, t) for s, t in zip(story.sections, targets, strict=False)]
        passed = sum(in_gate(w, t, low, high) for w, t in checked)
        return {
            "gate_unit": "chapter",
            "gate_checked": len(checked),
            "gate_passed": passed,
            "gate_compliance": passed / len(checked) if checked else None,
        }
    if story.target_words:
        ok = in_gate(story.words, story.target_words, low, high)
        return {"gate_unit": "story", "gate_checked": 1, "gate_passed": int(ok), "gate_compliance": float(ok)}
    return {"gate_unit": None, "gate_checked": 0, "gate_passed": 0, "gate_compliance": None}


def requirement_history(states: list[tuple[int, Any]]) -> dict[str, Any]:
    """Requirements opened and resolved (a key that was open and is gone from a later state)."""
    opened: set[str] = set()
    resolved: set[str] = set()
    previous: set[str] = set()
    found = False
    for _, state in states:
        narrative = ChapterSnapshot.read(state).state()
        if narrative is None:
            continue
        found = True
        keys = set(narrative.future_requirements)
        opened |= keys
        resolved |= previous - keys
        previous = keys
    if not found:
        return {"requirements_opened": None, "requirements_resolved": None, "requirements_open_at_end": None}
    return {
        "requirements_opened": len(opened),
        "requirements_resolved": len(resolved),
        "requirements_open_at_end": len(previous),
    }


def state_sizes(store: RunStore) -> list[dict[str, Any]]:
    """Bytes (UTF-8 JSON) and collection sizes of the state after each committed unit."""
    out = []
    chapters = store.info().unit_kind == "chapter"  # a step run's state is no ChapterSnapshot
    for unit, text in store.query("SELECT unit, state FROM states WHERE unit >= 1 ORDER BY unit"):
        state = json.loads(text)
        narrative = ChapterSnapshot.read(state).state() if chapters else None
        counts = (
            {k: len(v) for k, v in narrative.model_dump().items() if isinstance(v, list | dict)}
            if narrative is not None
            else {}
        )
        out.append({"unit": unit, "bytes": len(text.encode("utf-8")), **counts})
    return out


def token_usage(store: RunStore, words: int) -> dict[str, Any]:
    row = store.query(
        "SELECT count(*), coalesce(sum(prompt_tokens), 0), coalesce(sum(cached_prompt_tokens), 0), "
        "coalesce(sum(completion_tokens), 0), coalesce(sum(error IS NOT NULL), 0) FROM llm_calls"
    )[0]
    calls, prompt, cached, completion, errors = (int(v) for v in row)
    per_k = (lambda n: n / (words / 1000)) if words else (lambda n: None)
    return {
        "llm_calls": calls,
        "llm_errors": errors,
        "prompt_tokens": prompt,
        "cached_prompt_tokens": cached,
        "completion_tokens": completion,
        "prompt_tokens_per_1k_words": per_k(prompt),
        "completion_tokens_per_1k_words": per_k(completion),
        "total_tokens_per_1k_words": per_k(prompt + completion),
        "cached_share": cached / prompt if prompt else None,
    }


def style_metrics(store: RunStore) -> dict[str, Any]:
    """Each chapter's distance from the writer's ``--style`` sample (``agent.style``), its mean and maximum,
    and the chapters past the drift threshold; None when the run has no sample."""
    from agent.style.report import chapter_distances

    rows = chapter_distances(store.plans.get("style"), store.chapters())
    if not rows:
        return {
            "style_distance_mean": None,
            "style_distance_max": None,
            "style_drifted_chapters": None,
            "style_distances": [],
        }
    totals = [r["total"] for r in rows]
    return {
        "style_distance_mean": sum(totals) / len(totals),
        "style_distance_max": max(totals),
        "style_drifted_chapters": sum(r["drifted"] for r in rows),
        "style_distances": rows,
    }


def model_free_metrics(store: RunStore, story: Story | None = None) -> dict[str, Any]:
    story = story or load_story(store)
    toks = tokens(story.text)
    states = [
        (u, json.loads(s))
        for u, s in store.query("SELECT unit, state FROM states ORDER BY unit")
        if store.info().unit_kind == "chapter"
    ]
    sizes = state_sizes(store)
    degraded = store.query("SELECT count(*) FROM chapters WHERE degraded = 1")[0][0]
    return {
        "words": story.words,
        "target_words": story.target_words,
        "sections": len(story.sections),
        **gate_compliance(store, story),
        "degraded_chapters": int(degraded),
        "distinct_1": distinct_n(toks, 1),
        "distinct_2": distinct_n(toks, 2),
        "distinct_3": distinct_n(toks, 3),
        "repeated_4gram_rate": repeated_ngram_rate(toks, 4),
        **requirement_history(states),
        "final_state_bytes": sizes[-1]["bytes"] if sizes else None,
        "state_sizes": sizes,
        **token_usage(store, story.words),
        **style_metrics(store),
    }
