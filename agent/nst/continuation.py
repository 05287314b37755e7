"""Planning chapters after the last one of a finished book (``fabula continue``).

The planner asks for the outline of the new chapters only, from what the book has become rather
than from a prompt alone: the premise (the writer's, else the run's), the narrative state after
the last chapter with its open future requirements, and the ends of the last chapters as written.
The reply is held to the chapter outline's grammar and validator (``agent.nst.planner``); the new
chapters are numbered after the book's own and appended to its outline, the written chapters'
entries unchanged. The book keeps its chapter length: the new chapters are about as long as its
chapters so far.
"""

from __future__ import annotations

from typing import Any

from agent.language import instruction, resolve
from agent.llm import LLM
from agent.nst.budget import Budget
from agent.nst.config import Planned
from agent.nst.planner import SYSTEM, _outline
from agent.nst.state import NarrativeState
from agent.store.records import Chapter
from agent.text import count_words

TAIL_WORDS = 250
"""Words of each of the last chapters' ends the planner is shown (where the book stops)."""
LAST_CHAPTERS = 2
WRITTEN = "(written: the book's own chapter, as it stands)"
"""An imported chapter's outline description: the book has no outline of its own."""


def new_chapter_count(words: int, written: list[Chapter]) -> int:
    """About ``words`` words in chapters as long as the book's so far (at least one)."""
    total = sum(c.words for c in written)
    per = total / len(written) if written and total else 2000
    return max(1, round(words / per))


def written_outline(plan: dict[str, Any], chapters: list[Chapter]) -> list[dict[str, Any]]:
    """The outline entries of the chapters already written: the run's own (a written run), or
    one per chapter as the book has it (an imported book, which has no outline)."""
    outline = plan.get("outline") if isinstance(plan.get("outline"), list) else []
    if len(outline) >= len(chapters):
        return [dict(item) for item in outline[:len(chapters)]]
    return [{"id": c.index, "title": c.title or f"Chapter {c.index}", "description": WRITTEN,
             "target_words": max(c.words, 1)} for c in chapters]


def _tail(text: str, words: int = TAIL_WORDS) -> str:
    parts = text.split()
    return text.strip() if len(parts) <= words else "... " + " ".join(parts[-words:])


def continuation_request(premise: str, state: NarrativeState, written: list[dict[str, Any]],
                         last: list[Chapter], words: int, chapters: int) -> str:
    """The planner's one request for the new chapters' outline."""
    per = max(1, round(words / chapters))
    titles = "\n".join(f"{c['id']}. {c['title']}" for c in written)
    ends = "\n\n".join(f"## Chapter {c.index}: {c.title or ''}\n{_tail(c.text)}" for c in last)
    return (f"Story prompt:\n{premise}\n\n"
            f"The book so far ({len(written)} chapters, finished):\n{titles}\n\n"
            f"Its narrative state after the last chapter:\n{state.render()}\n\n"
            f"How the last chapters end:\n{ends}\n\n"
            f"The book goes on. Write the chapter outline of its next {chapters} chapter(s) as JSON: the book's "
            f"title, then exactly {chapters} chapters with ids 1 to {chapters} (they will follow chapter "
            f"{len(written)}), each with a title, a description of 2-4 sentences of what happens, and target_words. "
            f"The targets must sum to {words} words (about {per} each). Go on from where the book stops, keep every "
            "character and fact of the state, and advance or resolve its open future requirements.")


def sequel_request(prompt: str, title: str, state: NarrativeState, book_one: list[dict[str, Any]],
                   last: list[Chapter], words: int, chapters: int) -> str:
    """The planner's one request for a sequel's outline (``fabula sequel``)."""
    per = max(1, round(words / chapters))
    titles = "\n".join(f"{c['id']}. {c['title']}" for c in book_one)
    ends = "\n\n".join(f"## Chapter {c.index}: {c.title or ''}\n{_tail(c.text)}" for c in last)
    return (f"Story prompt:\n{prompt}\n\n"
            f"This book is a sequel. Book one, \"{title}\" ({len(book_one)} chapters):\n{titles}\n\n"
            f"The narrative state at the end of book one, which this book starts from:\n{state.render()}\n\n"
            f"How book one ends:\n{ends}\n\n"
            f"Write the chapter outline of this new book as JSON: its own title, then exactly {chapters} chapters "
            f"with ids 1 to {chapters}, each with a title, a description of 2-4 sentences of what happens, and "
            f"target_words. The targets must sum to {words} words (about {per} each). It begins after book one "
            "ends, keeps every character and fact of the state, and keeps or resolves the open future "
            "requirements as the story prompt says.")


def plan_continuation(llm: LLM, budget: Budget, config: Planned, *, premise: str, state: NarrativeState,
                      written: list[dict[str, Any]], chapters: list[Chapter], words: int,
                      sequel_of: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """The planned title and the new chapters' outline entries, numbered after ``written``
    (``PlanError`` when no valid outline came back within the planner's attempts). ``sequel_of``:
    the title of the finished book ``written`` and ``chapters`` are; the outline is then a new
    book's, numbered from 1."""
    count = new_chapter_count(words, chapters)
    last = chapters[-LAST_CHAPTERS:]
    asked = (sequel_request(premise, sequel_of, state, written, last, words, count) if sequel_of is not None
             else continuation_request(premise, state, written, last, words, count))
    # the book's own language (its last chapters', unless --language says otherwise), not the premise's
    language = instruction(resolve(" ".join(c.text[:2000] for c in last) or premise, getattr(config, "language", None)))
    if language:
        asked = f"{asked}\n\n{language}"
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": asked}]
    title, items = _outline(llm, messages, words, count, config.temperature, config.outline_attempts,
                            config.gate_low, config.gate_high, budget)
    offset = 0 if sequel_of is not None else len(written)
    return title, [{**item, "id": item["id"] + offset} for item in items]


def book_words(chapters: list[Chapter]) -> int:
    return sum(c.words or count_words(c.text) for c in chapters)
