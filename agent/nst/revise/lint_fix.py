"""``fabula lint RUN --fix``: the passages the lint flags rewritten by the run's model, nothing else touched.

Each flagged passage (the sentences a flag lies in; overlapping ones merged) is sent alone, with what was
flagged in it, and the reply replaces exactly that passage; the chapter with its passages replaced is the
chapter's next version (the old one stays), its state is re-derived (``agent.nst.chapter.rederive``) and the later
chapters are marked stale, as after any revision. The passages of a chapter are asked at once
(``LLM.generate_many``: concurrently on a server).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.lint import LintRules, lint_book
from agent.lint.report import Flag, passage_span
from agent.llm.base import Request
from agent.nst.chapter.drafter import clean_prose
from agent.nst.chapter.rederive import rederive_nst
from agent.nst.config import NstConfig
from agent.pipelines import Rederived
from agent.run_context import RunContext
from agent.store.writer.edit import mark_stale
from agent.store.writer.review import record_action
from agent.text import count_words, sentence_spans

FIX_ASK = "Rewrite this passage of a novel"
"""How a fix request begins (a scripted author recognises it as a model reads it)."""
MAX_PASSAGES = 40
"""Passages of one chapter fixed in one pass (a chapter with more is mostly flagged: revise it instead)."""


@dataclass(frozen=True)
class Fixed:
    index: int
    passages: int
    version: int
    rederived: Rederived


def fix_request(passage: str, flags: list[Flag]) -> str:
    found = "\n".join(f'- {f.rule}: "{f.detail}"' for f in flags)
    return (
        f"{FIX_ASK} so that it no longer has what was flagged, keeping its events, facts and length.\n\n"
        f"Flagged:\n{found}\n\nPassage:\n{passage}\n\nReply with the rewritten passage only."
    )


def spans_to_fix(text: str, flags: list[Flag]) -> list[tuple[int, int, list[Flag]]]:
    """The passages to rewrite: each flag's sentences, overlapping passages merged, in text order."""
    spans = sentence_spans(text)
    starts = [s for s, _ in spans]
    merged: list[tuple[int, int, list[Flag]]] = []
    for flag in sorted(flags, key=lambda f: f.start):
        lo, hi = passage_span(spans, starts, flag.start, flag.end)
        if merged and lo < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]), [*merged[-1][2], flag])
        else:
            merged.append((lo, hi, [flag]))
    return merged[:MAX_PASSAGES]


def fix_chapter(ctx: RunContext[NstConfig], index: int, rules: LintRules) -> Fixed | None:
    """Rewrite chapter ``index``'s flagged passages; None when nothing is flagged (nothing stored)."""
    store, config = ctx.store, ctx.config
    chapters = store.chapters()
    report = lint_book([(c.title, c.text) for c in chapters], rules)
    chapter = chapters[index - 1]
    flags = report.chapters[index - 1].flags
    if not flags:
        return None
    passages = spans_to_fix(chapter.text, flags)
    requests = [
        Request(
            [{"role": "user", "content": fix_request(chapter.text[lo:hi], found)}],
            temperature=config.temperature,
            max_tokens=max(64, 3 * count_words(chapter.text[lo:hi]) + 64),
            role="lint_fix",
            sampling=config.sampling_for("nst_prose"),
        )
        for lo, hi, found in passages
    ]
    replies = ctx.llm.generate_many(requests, return_exceptions=True)
    text = chapter.text
    fixed = 0
    for (lo, hi, _), reply in sorted(zip(passages, replies, strict=True), key=lambda pr: -pr[0][0]):
        if isinstance(reply, Exception) or reply.finish_reason == "length":
            continue
        new = clean_prose(reply.text)
        if new.strip():
            text, fixed = text[:lo] + new + text[hi:], fixed + 1
    if text == chapter.text:
        return None
    stored = store.revise_chapter(index, text, reason=f"lint --fix: {fixed} passage(s)")
    mark_stale(store, index, what=f"chapter {index} fixed by lint (version {stored.version})", state_rederived=False)
    rederived = rederive_nst(ctx, index)
    mark_stale(
        store, index, what=f"chapter {index} fixed by lint (version {stored.version})", state_rederived=rederived.ok
    )
    record_action(store, "lint-fix", unit=index, version=stored.version, passages=fixed)
    return Fixed(index, fixed, stored.version, rederived)
