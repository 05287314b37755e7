"""Revising a Magnet paragraph from the writer's note (``fabula revise RUN --step N --note ...``).

One narrator call rewrites one paragraph of a committed step: it sees the story's premise, the paragraphs
just before, the paragraph as written and the note. The new text is the paragraph's next version (the old
one stays); the steps after it are marked stale. The world state is not re-derived from the text (as for
``fabula edit --step``: Magnet's world variables are what the writer sets).
"""

from __future__ import annotations

from typing import Any

from agent.errors import InputError
from agent.run_context import RunContext
from agent.store.records import Paragraph
from agent.store.writer.edit import mark_stale
from agent.store.writer.review import record_action
from agent.text import count_words

NOTE_HEADING = "# The writer's note"
CONTEXT_PARAGRAPHS = 3


def revise_paragraph(ctx: RunContext[Any], step: int, note: str, *, paragraph: int = 1) -> tuple[Paragraph, str]:
    """Rewrite paragraph ``paragraph`` (1-based) of ``step`` following ``note``: ``(new paragraph, old text)``."""
    store = ctx.store
    every = store.paragraphs()
    mine = [p for p in every if p.step == step]
    if not mine:
        raise InputError(f"step {step} has no paragraphs (last committed: {store.info().last_unit})")
    if not 1 <= paragraph <= len(mine):
        raise InputError(f"step {step} has {len(mine)} paragraph(s); no paragraph {paragraph}")
    target = mine[paragraph - 1]
    before = [p.text for p in every if (p.step, p.seq) < (target.step, target.seq)][-CONTEXT_PARAGRAPHS:]
    premise = (store.info().config.get("story") or {}).get("premise", "")
    asked = (
        f"# Premise\n{premise}\n\n# The paragraphs just before\n"
        + ("\n\n".join(before) or "(none)")
        + f"\n\n# The paragraph as written\n{target.text}\n\n{NOTE_HEADING}\n{note}\n\n"
        "Rewrite the paragraph following the note; keep what the note does not ask to change. "
        "Reply with the paragraph only."
    )
    settings = ctx.config
    answer = max(getattr(settings, "paragraph_tokens", 320), 2 * count_words(target.text))
    reply = ctx.llm.generate(
        [
            {"role": "system", "content": "You are the narrator of a story told in paragraphs."},
            {"role": "user", "content": asked},
        ],
        temperature=getattr(settings, "narrator_temperature", 0.35),
        max_tokens=answer + getattr(settings, "reasoning_tokens", 0),  # room to reason first (``paper``)
        role="narrator",
    )
    text = reply.text.strip()
    if not text:
        raise InputError(f"the revision of step {step}'s paragraph came back empty; nothing was stored")
    new = store.revise_paragraph(step, target.seq, text, reason=f"revise: {note}")
    mark_stale(store, step, what=f"step {step} paragraph {paragraph} revised", state_rederived=True)
    record_action(store, "revise", unit=step, paragraph=paragraph, note=note)
    return new, target.text
