"""Consistency error density from stored judgments (NstAgent 3.3; B.2; beyond the paper).

``CED = E / (W / 10^4)`` with ``W`` the words of the terminal window. Subtype CED counts the
subtypes with at least one reported contradiction (ConStory-Bench's released code); Instance
CED counts every reported contradiction. Both are split into window-local subtypes and the
globally scoped ``abandoned_plot_elements`` (local + global = total, as Table 10). A story is
scored only if all five category judgments are ``ok``; a failed one makes the story
unscored, never zero. Verified CED keeps only instances whose quotes occur in the story
(and, for local subtypes, whose contradicting quote lies in the window).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.eval.consistency import KIND, PROTOCOL_VERSION
from agent.eval.story import Story
from agent.quotes import normalize, occurs
from agent.store import RunStore
from agent.store import judgments as stored
from agent.store.judgments import Judgment
from grammars.judges import CATEGORIES, GLOBAL_SUBTYPES

PER_WORDS = 10_000


def ced(errors: int | float, words: int) -> float:
    if words <= 0:
        raise ValueError("CED needs a positive word count")
    return errors / (words / PER_WORDS)


@dataclass
class Instance:
    category: str
    subtype: str
    reply: dict[str, Any]
    verified: bool
    problem: str | None


@dataclass
class ConsistencyScore:
    """One judge's consistency result for one story under one protocol."""

    judge: str
    protocol: str
    complete: bool
    failed: list[str]
    missing: list[str]
    checked_words: int
    current: bool
    instances: list[Instance] = field(default_factory=list)
    judge_digest: str | None = None
    """The judge's setup digest (``agent.eval.judge.setup_spec``); ``None`` for judgments stored
    before setups were recorded."""

    def _counts(self, verified_only: bool = False, scope: str = "all") -> list[Instance]:
        out = [i for i in self.instances if i.verified or not verified_only]
        if scope == "local":
            out = [i for i in out if i.subtype not in GLOBAL_SUBTYPES]
        elif scope == "global":
            out = [i for i in out if i.subtype in GLOBAL_SUBTYPES]
        return out

    def metrics(self) -> dict[str, float | int]:
        """Every CED of this judgment, with its counts (empty when the story is not scored)."""
        if not self.complete or self.checked_words <= 0:
            return {}
        w = self.checked_words
        alli, veri = self._counts(), self._counts(verified_only=True)
        out: dict[str, float | int] = {
            "subtype_ced": ced(len({i.subtype for i in alli}), w),
            "instance_ced": ced(len(alli), w),
            "local_instance_ced": ced(len(self._counts(scope="local")), w),
            "global_instance_ced": ced(len(self._counts(scope="global")), w),
            "verified_subtype_ced": ced(len({i.subtype for i in veri}), w),
            "verified_instance_ced": ced(len(veri), w),
            "instances": len(alli),
            "dropped_unverified": len(alli) - len(veri),
            "checked_words": w,
        }
        for category in CATEGORIES:
            out[f"instance_ced.{category}"] = ced(sum(1 for i in alli if i.category == category), w)
        return out


def score_group(group: list[Judgment], story: Story) -> ConsistencyScore:
    """Score one (judge, protocol) group of category judgments against the story text."""
    first = group[0]
    window = first.meta.get("window", {})
    by_item = {j.item: j for j in group}
    failed = [c for c in CATEGORIES if c in by_item and not by_item[c].ok]
    missing = [c for c in CATEGORIES if c not in by_item]
    current = first.meta.get("digest") == story.digest
    score = ConsistencyScore(
        first.judge,
        first.protocol,
        not failed and not missing,
        failed,
        missing,
        int(window.get("checked_words", 0)),
        current,
        judge_digest=first.meta.get("judge_digest"),
    )
    whole = normalize(story.text)
    start = int(window.get("first", 1))
    in_window = normalize("\n\n".join(s.text for s in story.sections[start - 1 :]))
    for category in CATEGORIES:
        judgment = by_item.get(category)
        if judgment is None or not judgment.ok:
            continue
        for reply in judgment.reply.get("contradictions", []):
            score.instances.append(_verify(category, reply, whole, in_window, current))
    return score


def _verify(category: str, reply: dict[str, Any], whole: str, in_window: str, current: bool) -> Instance:
    subtype = reply["subtype"]
    if not current:
        problem: str | None = "the story changed since it was judged"
    elif not occurs(reply["exact_quote"], whole):
        problem = "exact_quote does not occur in the story"
    elif not occurs(reply["contradicting_quote"], whole):
        problem = "contradicting_quote does not occur in the story"
    elif subtype not in GLOBAL_SUBTYPES and not occurs(reply["contradicting_quote"], in_window):
        problem = "contradicting_quote lies before the scope marker"
    else:
        problem = None
    return Instance(category, subtype, reply, problem is None, problem)


def consistency_scores(store: RunStore, story: Story) -> list[ConsistencyScore]:
    """Every stored (judge, protocol) group for this story, scored; current ones first."""
    groups: dict[tuple[str, str], list[Judgment]] = {}
    for j in stored.select(store, KIND):
        if j.protocol.startswith(PROTOCOL_VERSION):
            groups.setdefault((j.judge, j.protocol), []).append(j)
    scores = [score_group(g, story) for g in groups.values()]
    latest = {key: max(j.updated_at for j in g) for key, g in groups.items()}
    scores.sort(key=lambda s: (not s.current, not s.complete, -latest[(s.judge, s.protocol)]))
    return scores


def best_scores(store: RunStore, story: Story) -> list[ConsistencyScore]:
    """One score per judge: its most recent complete judgment of the current text, if any."""
    chosen: dict[str, ConsistencyScore] = {}
    for score in consistency_scores(store, story):
        if score.current and score.complete and score.judge not in chosen:
            chosen[score.judge] = score
    return list(chosen.values())
