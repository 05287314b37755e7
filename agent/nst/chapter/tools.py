"""The chapter's tools as objects: each owns its grammar, budget, legality and run.

``legal_tools`` asks every tool whether it may be called now; ``turn_grammar`` joins the legal
tools' grammars into the turn's output type, so a model cannot call what is not allowed, and
arguments are narrowed too: ``read`` and ``correct`` take a chapter id from the chapters that
exist at that moment (a tool with no legal argument is not offered at all). The controller
still checks every rule (the grammar narrows, the controller decides): a server that ignores a
constraint, or a call over budget, gets an error telling the model how to proceed, and every
failed call is charged against a small per-chapter budget, after which only the required
steps are offered.

A tool asks the chapter in flight only what :class:`Chapter` offers (its session, a committed
chapter, a window of text that fits, a search, a correction, a draft, an update); the chapter
loop implements it, so this module does not know the loop.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, Field, RootModel, create_model

from agent.gate import Gate
from agent.nst.config import NstConfig
from agent.store import CommitError, search_ref
from agent.store.records import Chapter as StoredChapter
from agent.store.search import MAX_TERMS, Hit, dropped_terms
from agent.store.search_ref import SearchStyle
from agent.text import count_words
from grammars.base import Grammar
from grammars.nst import (
    TOOL_CALLS,
    CharacterNote,
    CharacterNoteEvidence,
    CharacterSnapshot,
    CharacterState,
    CorrectCall,
    Entry,
    Fact,
    KeyedEntry,
    ReadCall,
    UpdateCall,
)


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
    failed_budget: int = 5
    turn: int = 0
    reads: int = 0
    searches: int = 0
    corrects: int = 0
    failed: int = 0
    accepted_title: str | None = None
    accepted_text: str | None = None
    updated: bool = False
    finished: bool = False
    attempts: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    open_requirements: tuple[str, ...] = ()
    """Keys a ``resolve`` may name now (the grammar's enum)."""
    min_events: int = 0
    """Past events every update must add (the run's ``min_past_events``)."""
    stuck_limit: int = 0
    """Failed update attempts in a row that end the turns (``failed_update_limit``; 0: none)."""
    failures_in_a_row: int = 0
    stuck: bool = False
    """``stuck_limit`` update attempts in a row failed: no more turns for this chapter."""
    retry_update: bool = False
    """An update had entries refused: one more update may fix them (optional)."""
    evidence: bool = True
    """The update grammar asks each entry for a quote of the chapter (the run's ``evidence``)."""
    entry_limit: int = 0
    """The most entries per update array (the run's ``update_entry_limit``; 0: none)."""
    earlier_books: bool = False
    """A sequel (``fabula sequel``): the search covers the earlier books too, so chapter 1 may search."""
    search_style: SearchStyle = "fabula"
    """How the search ranks and answers (the run's ``search_style``; "reference": the hits as JSON)."""
    character_notes: bool = False
    """A character entry is ``{name, description}`` (the run's ``state_style`` "reference")."""
    corrected_current: bool = False
    """The accepted draft was corrected: no whole-chapter write may replace it (the native protocol's rule)."""

    @classmethod
    def for_config(
        cls, index: int, gate: Gate, config: NstConfig, open_requirements: tuple[str, ...]
    ) -> ChapterSession:
        """The session of chapter ``index`` under a run's settings (``agent.nst.config.NstConfig``)."""
        return cls(
            index=index,
            gate=gate,
            with_state=config.state,
            lookback=config.lookback,
            max_turns=config.max_turns,
            read_budget=config.read_budget,
            search_budget=config.search_budget,
            correct_budget=config.correct_budget,
            failed_budget=config.failed_call_budget if config.required_after_failures else NO_LIMIT,
            min_events=config.min_past_events,
            open_requirements=open_requirements,
            evidence=config.evidence,
            entry_limit=config.update_entry_limit,
            stuck_limit=config.failed_update_limit,
            search_style=config.search_style,
            character_notes=config.state_style == "reference",
        )

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

    def chapters_available(self) -> tuple[int, ...]:
        """Chapter ids a read or correct may name now: the earlier chapters, and this one once accepted."""
        return tuple(range(1, self.index + (1 if self.written else 0)))

    def note_turn(self, ok: bool, *, update_failed: bool = False) -> None:
        """Count the update attempts that failed in a row while the update is due (written, not yet
        updated): ``update_failed``, a refused update or a reply cut off or invalid while the update
        was on offer. A turn that succeeds starts the count anew; another tool's refusal is the
        failed-call budget's (it neither counts nor resets)."""
        due = self.written and self.with_state and not self.updated
        if ok or not due:
            self.failures_in_a_row = 0
        elif update_failed:
            self.failures_in_a_row += 1
        if self.stuck_limit and self.failures_in_a_row >= self.stuck_limit:
            self.stuck = True

    def may_explore(self) -> bool:
        """Optional tools stay on offer until the failed-call budget is spent."""
        return self.lookback and self.failed < self.failed_budget


NO_LIMIT = 1 << 30
"""The failed-call budget when ``required_after_failures`` is off (the reference has no such rule)."""


class Chapter(Protocol):
    """What a tool may ask of the chapter in flight; ``agent.nst.chapter.loop.ChapterLoop`` implements it."""

    @property
    def session(self) -> ChapterSession:
        """The controller's record of the chapter (counters, the accepted draft, what is done)."""

    def committed(self, chapter: int) -> StoredChapter | None:
        """An earlier chapter as the store holds it."""

    def read_window(self, text: str, offset: int, chapter: int) -> int:
        """Where a read of ``text`` from ``offset`` ends (the page that fits); ToolError without room."""

    def search(self, query: str) -> tuple[list[Hit], list[tuple[str, str]]]:
        """The best passages of earlier chapters, and digested past events, for ``query``."""

    def fit_lookup(self, passages: list[str]) -> list[str]:
        """The best-ranked passages that fit the room left."""

    def correct(self, chapter: int, span: str, new: str, reason: str) -> None:
        """Replace ``span`` in committed ``chapter`` (CommitError if the store refuses)."""

    def write_draft(self, title: str) -> str:
        """One draft of the chapter under its gate; the verdict for the model."""

    def apply_update(self, call: UpdateCall) -> str:
        """Apply the chapter's state transition; what it did, for the model (ToolError if refused)."""


class Tool(ABC):
    """One tool of the chapter loop."""

    name: ClassVar[str]
    call: ClassVar[type[Grammar]]
    """The registered grammar of the call (its arguments unnarrowed)."""

    def budget(self, s: ChapterSession) -> tuple[int, int] | None:
        """``(used, limit)`` for a budgeted tool, else None."""
        return None

    @abstractmethod
    def legal(self, s: ChapterSession) -> bool:
        """May the tool be called now (with at least one legal argument)?"""

    def refusal(self, s: ChapterSession) -> str:
        """Why the tool is not legal now, and what to do instead."""
        return f"{self.name} is not available now; available: {', '.join(legal_tools(s))}"

    def grammar(self, s: ChapterSession) -> type[BaseModel]:
        """The call's output type this turn (arguments narrowed to what is legal)."""
        return self.call

    @abstractmethod
    def run(self, chapter: Chapter, call: Any) -> str:
        """Carry the call out; its result goes back to the model. Raises :class:`ToolError`."""


class Lookback(Tool, ABC):
    """A budgeted, optional tool: disabled by --no-lookback, charged on success."""

    used_attr: ClassVar[str]
    limit_attr: ClassVar[str]

    def budget(self, s: ChapterSession) -> tuple[int, int]:
        return getattr(s, self.used_attr), getattr(s, self.limit_attr)

    def has_budget(self, s: ChapterSession) -> bool:
        used, limit = self.budget(s)
        return used < limit

    def refusal(self, s: ChapterSession) -> str:
        if not s.lookback:
            return f"{self.name} is disabled in this run; proceed with the chapter"
        used, limit = self.budget(s)
        if used >= limit:
            return f"the {self.name} budget ({limit} per chapter) is spent; proceed with the next step"
        if s.failed >= s.failed_budget:
            return f"too many failed calls in this chapter ({s.failed}); proceed with the required steps"
        return super().refusal(s)


class Read(Lookback):
    """Reads a chapter whole, or the page of it that fits the context (budget step a)."""

    name, call, used_attr, limit_attr = "read", ReadCall, "reads", "read_budget"

    def legal(self, s: ChapterSession) -> bool:
        return s.may_explore() and self.has_budget(s) and bool(s.chapters_available())

    def grammar(self, s: ChapterSession) -> type[BaseModel]:
        return _with_chapters(ReadCall, s.chapters_available())

    def run(self, chapter: Chapter, call: Any) -> str:
        s = chapter.session
        if call.chapter == s.index and s.written:
            text, title = s.accepted_text or "", s.accepted_title or ""
        elif 1 <= call.chapter < s.index:
            row = chapter.committed(call.chapter)
            if row is None:
                raise ToolError(f"chapter {call.chapter} is not in the store")
            text, title = row.text, row.title
        elif call.chapter == s.index:
            raise ToolError(f"chapter {call.chapter} is not written yet; write it first")
        else:
            raise ToolError(f"chapter {call.chapter} does not exist yet; chapters 1 to {s.index - 1} are written")
        offset = int(getattr(call, "offset", 0) or 0)
        if offset >= len(text) and offset:
            raise ToolError(f"offset {offset} is past the end of chapter {call.chapter} ({len(text)} characters)")
        end = chapter.read_window(text, offset, call.chapter)
        s.reads += 1
        head = f"Chapter {call.chapter}: {title}"
        if offset == 0 and end >= len(text):
            return f"{head}\n\n{text}"
        more = (
            f" To continue, read chapter {call.chapter} with offset {end}."
            if end < len(text)
            else " This is the end of the chapter."
        )
        return f"{head} (characters {offset}-{end} of {len(text)}).{more}\n\n{text[offset:end]}"


class Search(Lookback):
    name, call, used_attr, limit_attr = "search", TOOL_CALLS["search"], "searches", "search_budget"

    def legal(self, s: ChapterSession) -> bool:
        return s.may_explore() and self.has_budget(s) and (s.index > 1 or s.earlier_books)

    def run(self, chapter: Chapter, call: Any) -> str:
        s = chapter.session
        if not call.query.strip():
            raise ToolError("the search query is empty")
        s.searches += 1
        hits, events = chapter.search(call.query)
        if s.search_style == "reference":
            return _reference_answer(chapter, call.query, hits, events)
        note = f" (only the first {MAX_TERMS} terms of the query were searched)" if dropped_terms(call.query) else ""
        if not hits and not events:
            return f"No passages in chapters 1 to {s.index - 1} match {call.query!r}{note}."
        found = [f"[{f'book {h.book}, ' if h.book is not None else ''}chapter {h.chapter}] {h.text}" for h in hits]
        # consolidated events are digested in the prompt but stay findable, word for word
        found += [f"[past event {key}] {text}" for key, text in events]
        kept = chapter.fit_lookup(found)
        if not kept:
            raise ToolError("there is no room in the context for search results now; continue with the chapter")
        return "\n".join([f"{len(kept)} passage(s) for {call.query!r}{note}:", *kept])


def _reference_answer(chapter: Chapter, query: str, hits: list[Hit], events: list[tuple[str, str]]) -> str:
    """The search's answer in the reference's JSON shape (agent.store.search_ref.result_json): the hits that
    fit the room left, best first; digested past events, and a note when terms were dropped, as extra keys."""
    found = [search_ref.hit_record(h) for h in hits]
    digested = [{"key": key, "description": text} for key, text in events]
    kept = chapter.fit_lookup([json.dumps(item, ensure_ascii=False) for item in [*found, *digested]])
    if len(kept) < len(found) + len(digested) and not kept:
        raise ToolError("there is no room in the context for search results now; continue with the chapter")
    dropped = search_ref.dropped_terms(query)
    note = f"only the first {MAX_TERMS} terms of the query were searched" if dropped else None
    return search_ref.result_json(
        query, found[: len(kept)], past_events=digested[: max(0, len(kept) - len(found))], note=note
    )


class Correct(Lookback):
    name, call, used_attr, limit_attr = "correct", CorrectCall, "corrects", "correct_budget"

    def legal(self, s: ChapterSession) -> bool:
        return s.may_explore() and self.has_budget(s) and bool(s.chapters_available())

    def grammar(self, s: ChapterSession) -> type[BaseModel]:
        return _with_chapters(CorrectCall, s.chapters_available())

    def run(self, chapter: Chapter, call: Any) -> str:
        s = chapter.session
        if call.old == call.new:
            raise ToolError("old and new are the same; nothing to correct")
        if call.chapter == s.index and s.written:
            span = find_span(s.accepted_text or "", call.old)
            revised = (s.accepted_text or "").replace(span, call.new, 1)
            words = count_words(revised)
            if not s.gate.accepts(words):
                raise ToolError(
                    f"after this correction the chapter would have {words} words, outside "
                    f"{s.gate.low}-{s.gate.high}; make a smaller correction"
                )
            s.accepted_text = revised
        elif 1 <= call.chapter < s.index:
            row = chapter.committed(call.chapter)
            if row is None:
                raise ToolError(f"chapter {call.chapter} is not in the store")
            span = find_span(row.text, call.old)
            try:
                chapter.correct(call.chapter, span, call.new, reason=f"correct: {call.reason}")
            except CommitError as exc:
                raise ToolError(str(exc)) from exc
        else:
            raise ToolError(
                f"chapter {call.chapter} cannot be corrected now (written: 1 to "
                f"{s.index - 1 + (1 if s.written else 0)})"
            )
        s.corrects += 1
        return f"Corrected chapter {call.chapter}: replaced {len(span)} characters. The search index is up to date."


class Write(Tool):
    name, call = "write", TOOL_CALLS["write"]

    def legal(self, s: ChapterSession) -> bool:
        return not s.written

    def refusal(self, s: ChapterSession) -> str:
        return "the chapter is already written and accepted; proceed with the next step"

    def run(self, chapter: Chapter, call: Any) -> str:
        return chapter.write_draft(call.title)


class Update(Tool):
    name, call = "update", TOOL_CALLS["update"]

    def legal(self, s: ChapterSession) -> bool:
        return s.written and s.with_state and (not s.updated or s.retry_update)

    def grammar(self, s: ChapterSession) -> type[BaseModel]:
        return update_grammar(
            s.open_requirements, s.min_events, s.evidence, notes=s.character_notes, entries=s.entry_limit
        )

    def refusal(self, s: ChapterSession) -> str:
        if not s.with_state:
            return "there is no narrative state in this run; finish the chapter"
        if s.updated:
            return "the state is already updated for this chapter; finish"
        return "update comes after the accepted write; write the chapter first"

    def run(self, chapter: Chapter, call: Any) -> str:
        return chapter.apply_update(call)


class Finish(Tool):
    name, call = "finish", TOOL_CALLS["finish"]

    def legal(self, s: ChapterSession) -> bool:
        return s.required() == ["finish"]

    def refusal(self, s: ChapterSession) -> str:
        return f"cannot finish yet: still needed: {', '.join(s.required()[:-1])}"

    def run(self, chapter: Chapter, call: Any) -> str:
        chapter.session.finished = True
        return "chapter finished"


TOOLS: dict[str, Tool] = {tool.name: tool for tool in (Read(), Search(), Write(), Correct(), Update(), Finish())}
"""Every tool, in the order the turn grammar lists them."""


def legal_tools(s: ChapterSession) -> list[str]:
    """The calls allowed now. When the turns left are just enough for the required steps,
    only the next required step is offered, so a chapter always ends inside the cap."""
    required = s.required()
    if s.turns_left() <= len(required):
        return [required[0]]
    return [name for name, tool in TOOLS.items() if tool.legal(s)]


def check_allowed(s: ChapterSession, tool: str) -> None:
    """Refuse a call the rules do not allow now, with the reason and what to do instead."""
    if tool not in TOOLS:
        raise ToolError(f"there is no tool {tool!r}; available: {', '.join(legal_tools(s))}")
    if tool in legal_tools(s):
        return
    raise ToolError(TOOLS[tool].refusal(s))


def turn_grammar(s: ChapterSession, tools: list[str]) -> type[BaseModel]:
    """The output type of a turn offering ``tools`` (one model, or a union of them)."""
    if not tools:
        raise ValueError("a turn needs at least one tool")
    return _union(tuple(TOOLS[name].grammar(s) for name in TOOLS if name in tools))


@lru_cache(maxsize=128)
def _union(models: tuple[type[BaseModel], ...]) -> type[BaseModel]:
    if len(models) == 1:
        return models[0]
    union: Any = models[0]
    for model in models[1:]:
        union = union | model
    return RootModel[union]


@lru_cache(maxsize=256)
def _with_chapters(base: type[Grammar], chapters: tuple[int, ...]) -> type[BaseModel]:
    """``base`` with its ``chapter`` argument narrowed to ``chapters`` (an enum the decoder enforces)."""
    doc = f"one of the chapters that exist now: {', '.join(map(str, chapters))}"
    allowed: Any = Literal[chapters]  # a Literal built at run time: its values are known only now
    return create_model(base.__name__, __base__=base, chapter=(allowed, Field(description=doc)))


@lru_cache(maxsize=256)
def update_grammar(
    open_keys: tuple[str, ...],
    min_events: int = 0,
    evidence: bool = True,
    *,
    notes: bool = False,
    entries: int = 0,
) -> type[BaseModel]:
    """``update`` with ``resolve_future_requirement`` narrowed to the requirement keys open now
    (an empty array when none is open) and at least ``min_events`` past events; without
    ``evidence``, the paper's four arrays with no quotes (Eq. 6); with ``notes``, each character a
    ``{name, description}`` entry (the reference's); with ``entries``, at most that many entries in
    each array, a character's facts included (``update_entry_limit``)."""
    base = TOOL_CALLS["update"]
    most = entries or None
    if open_keys:
        resolve: Any = (
            list[Literal[open_keys]],  # type: ignore[valid-type]
            Field(
                description=f"keys of open requirements this chapter fulfilled, from: {', '.join(open_keys)}",
                max_length=most,
            ),
        )
    else:
        resolve = (list[str], Field(max_length=0, description="no requirement is open: []"))
    entry = KeyedEntry if evidence else Entry
    events: Any = (list[entry], Field(min_length=min_events or None, max_length=most))  # type: ignore[valid-type]
    if evidence and not notes and not entries:
        return create_model(base.__name__, __base__=base, resolve_future_requirement=resolve, add_past_event=events)
    if notes:
        characters: Any = list[CharacterNoteEvidence] if evidence else list[CharacterNote]
    else:
        snapshot = CharacterState if evidence else CharacterSnapshot
        character = _with_facts(snapshot, entries) if entries else snapshot
        characters = list[character]  # type: ignore[valid-type]
    return create_model(
        base.__name__,
        __base__=base,
        resolve_future_requirement=resolve,
        add_past_event=events,
        upsert_character_state=(characters, Field(max_length=most)),
        add_future_requirement=(list[KeyedEntry] if evidence else list[Entry], Field(max_length=most)),
    )


@lru_cache(maxsize=16)
def _with_facts(snapshot: type[CharacterSnapshot], entries: int) -> type[CharacterSnapshot]:
    """``snapshot`` with at most ``entries`` identity facts."""
    facts = snapshot.model_fields["facts"]
    return create_model(
        snapshot.__name__,
        __base__=snapshot,
        facts=(list[Fact], Field(max_length=entries, description=facts.description)),
    )


def unwrap(parsed: Any) -> Any:
    return parsed.root if isinstance(parsed, RootModel) else parsed


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
