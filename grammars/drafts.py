"""Best of N (``--drafts N --drafts-judge``): the judge's choice among a chapter's drafts.

One closed object: the number of the chosen draft and one line saying why. The draft number is
bounded here by the most drafts a run may ask for; the caller checks it against the drafts it showed.
"""

from __future__ import annotations

from pydantic import Field

from grammars.base import Grammar
from grammars.registry import register

MAX_DRAFTS = 8
"""The most drafts of one chapter ``--drafts`` may ask for (and the judge may name)."""


@register("nst_drafts_judge")
class DraftChoice(Grammar):
    """The draft that best carries out the chapter's outline item, true to the state before it."""

    draft: int = Field(ge=1, le=MAX_DRAFTS, description="the number of the chosen draft")
    reason: str = Field(min_length=1, max_length=300, description="why, in one line")
