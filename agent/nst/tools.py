"""The chapter's tools, their budgets, and the grammar of each turn.

``legal_tools`` says which calls the rules allow at this moment; ``turn_grammar`` turns that
into the output type of the turn, so a model cannot call what is not allowed. The executors
check every rule again (the grammar narrows, the controller decides): a server that ignores
a constraint, or a call over budget, gets an error that tells the model to proceed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, RootModel

from agent.nst.length import Gate
from agent.store import CommitError, RunStore
from agent.text import count_words
from grammars.nst import TOOL_CALLS, CorrectCall

TOOL_ORDER = tuple(TOOL_CALLS)


class ToolError(ValueError):
    """A call the rules refuse; its message goes back to the model."""


@dataclass
class ChapterSession:
    """Everything the controller knows about the chapter in flight."""

    index: int
    gate: Gate
    with_state: bool
    lookback: bool
    max_turns: int
    read_budget: int
    search_budget: int
    correct_budget: int
    turn: int = 0
    reads: int = 0
    searches: int = 0
    corrects: int = 0
    accepted_title: str | None = None
    accepted_text: str | None = None
    updated: bool = False
    finished: bool = False
    attempts: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def written(self) -> bool:
        return self.accepted_text is not None

    def turns_left(self) -> int:
        """Turns still available, counting the one about to be taken."""
        return self.max_turns - self.turn

    def required(self) -> list[str]:
        """The steps still needed to finish, in order."""
        steps = [] if self.written else ["write"]
        if self.with_state and not self.updated:
            steps.append("update")
        return [*steps, "finish"]


def legal_tools(s: ChapterSession) -> list[str]:
    """The calls allowed now. When the turns left are just enough for the required steps,
    only the next required step is offered, so a chapter always ends inside the cap."""
    required = s.required()
    if s.turns_left() <= len(required):
        return [required[0]]
    tools: list[str] = []
    if s.lookback:
        if s.reads < s.read_budget and (s.index > 1 or s.written):
            tools.append("read")
        if s.searches < s.search_budget and s.index > 1:
            tools.append("search")
    if not s.written:
        tools.append("write")
    if s.lookback and s.corrects < s.correct_budget and (s.index > 1 or s.written):
        tools.append("correct")
    if s.written and s.with_state and not s.updated:
        tools.append("update")
    if required == ["finish"]:
        tools.append("finish")
    return tools


@lru_cache(maxsize=64)
def turn_grammar(tools: tuple[str, ...]) -> type[BaseModel]:
    """The output type of a turn offering ``tools`` (one model, or a union of them)."""
    models = [TOOL_CALLS[name] for name in TOOL_ORDER if name in tools]
    if not models:
        raise ValueError("a turn needs at least one tool")
    if len(models) == 1:
        return models[0]
    union: Any = models[0]
    for model in models[1:]:
        union = union | model
    return RootModel[union]  # type: ignore[valid-type]


def unwrap(parsed: Any) -> Any:
    return parsed.root if isinstance(parsed, RootModel) else parsed


def check_allowed(s: ChapterSession, tool: str) -> None:
    """Refuse a call the rules do not allow now, with the reason and what to do instead."""
    if tool in legal_tools(s):
        return
    budgets = {"read": (s.reads, s.read_budget), "search": (s.searches, s.search_budget),
               "correct": (s.corrects, s.correct_budget)}
    if tool in budgets and not s.lookback:
        raise ToolError(f"{tool} is disabled in this run; proceed with the chapter")
    if tool in budgets and budgets[tool][0] >= budgets[tool][1]:
        raise ToolError(f"the {tool} budget ({budgets[tool][1]} per chapter) is spent; proceed with the next step")
    if tool == "write" and s.written:
        raise ToolError("the chapter is already written and accepted; proceed with the next step")
    if tool == "update":
        if not s.with_state:
            raise ToolError("there is no narrative state in this run; finish the chapter")
        if s.updated:
            raise ToolError("the state is already updated for this chapter; finish")
        raise ToolError("update comes after the accepted write; write the chapter first")
    if tool == "finish":
        raise ToolError(f"cannot finish yet: still needed: {', '.join(s.required()[:-1])}")
    raise ToolError(f"{tool} is not available now; available: {', '.join(legal_tools(s))}")


def do_read(s: ChapterSession, store: RunStore, chapter: int) -> str:
    """Full text of a committed chapter, or of the current one once its write is accepted."""
    if chapter == s.index and s.written:
        text, title = s.accepted_text or "", s.accepted_title or ""
    elif 1 <= chapter < s.index:
        row = store.chapter(chapter)
        if row is None:
            raise ToolError(f"chapter {chapter} is not in the store")
        text, title = row.text, row.title
    elif chapter == s.index:
        raise ToolError(f"chapter {chapter} is not written yet; write it first")
    else:
        raise ToolError(f"chapter {chapter} does not exist yet; chapters 1 to {s.index - 1} are written")
    s.reads += 1
    return f"Chapter {chapter}: {title}\n\n{text}"


def do_search(s: ChapterSession, store: RunStore, query: str, k: int) -> str:
    """The best ``k`` sentence windows from earlier chapters."""
    if not query.strip():
        raise ToolError("the search query is empty")
    s.searches += 1
    hits = store.search(query, k=k, before=s.index)
    if not hits:
        return f"No passages in chapters 1 to {s.index - 1} match {query!r}."
    lines = [f"{len(hits)} passage(s) for {query!r}:"]
    lines += [f"[chapter {h.chapter}] {h.text}" for h in hits]
    return "\n".join(lines)


def find_span(text: str, old: str) -> str:
    """The one span of ``text`` that ``old`` names: exact, else whitespace-tolerant."""
    count = text.count(old)
    if count == 1:
        return old
    if count > 1:
        raise ToolError(f"the text to replace occurs {count} times; quote more of it so it is unique")
    words = old.split()
    if not words:
        raise ToolError("the text to replace is empty")
    pattern = r"\s+".join(re.escape(w) for w in words)
    matches = list(re.finditer(pattern, text))
    if len(matches) == 1:
        return matches[0].group(0)
    if matches:
        raise ToolError(f"the text to replace occurs {len(matches)} times; quote more of it so it is unique")
    raise ToolError("the text to replace does not occur in that chapter; quote it exactly (read it first)")


def do_correct(s: ChapterSession, store: RunStore, call: CorrectCall) -> str:
    """Fix one span in an earlier chapter (reindexed at once) or in the accepted draft."""
    if call.old == call.new:
        raise ToolError("old and new are the same; nothing to correct")
    if call.chapter == s.index and s.written:
        span = find_span(s.accepted_text or "", call.old)
        revised = (s.accepted_text or "").replace(span, call.new, 1)
        words = count_words(revised)
        if not s.gate.accepts(words):
            raise ToolError(f"after this correction the chapter would have {words} words, outside "
                            f"{s.gate.low}-{s.gate.high}; make a smaller correction")
        s.accepted_text = revised
    elif 1 <= call.chapter < s.index:
        row = store.chapter(call.chapter)
        if row is None:
            raise ToolError(f"chapter {call.chapter} is not in the store")
        span = find_span(row.text, call.old)
        try:
            store.correct_chapter(call.chapter, span, call.new, reason=f"correct: {call.reason}")
        except CommitError as exc:
            raise ToolError(str(exc)) from exc
    else:
        raise ToolError(f"chapter {call.chapter} cannot be corrected now (written: 1 to "
                        f"{s.index - 1 + (1 if s.written else 0)})")
    s.corrects += 1
    return f"Corrected chapter {call.chapter}: replaced {len(span)} characters. The search index is up to date."
