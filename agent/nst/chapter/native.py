"""The chapter loop's native tool protocol (``tool_protocol`` "native", the paper profile).

The NstAgent reference talks to its model through the API's own tool calls, and this module does the
same, in fabula's words: every turn offers all five tools (:func:`tool_specs`, ``tool_choice`` auto), a
reply may make several calls and each runs in order, each result goes back as a ``role: tool`` message
holding JSON (``ok``, and ``error`` when refused: an exhausted budget is told, never hidden), the prose
travels inside ``write``'s ``content``, a rejected write is followed by one user message of length
feedback, and only a reply that calls no tool and says ``DONE`` ends the chapter (after an accepted
write; any other text gets a nudge). The tools' rules are the same objects the grammar protocol uses
(``agent.nst.chapter.tools``); only how a call arrives and how its result is told differ.

Why a second protocol: the paper profile measures the reference's method, and the model sees that method
through this protocol; the default keeps the grammar protocol, which small models follow reliably.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace
from typing import Any, Protocol

from pydantic import ValidationError

from agent.gate import Gate
from agent.llm.types import Completion, Message, ToolCall, ToolSpec, Usage
from agent.nst.chapter.drafter import Drafter, clean_prose
from agent.nst.chapter.ledger import ChapterLedger
from agent.nst.chapter.rejected import Draft, DraftKeeper, reference_feedback
from agent.nst.chapter.tools import TOOLS, Chapter, ToolError, find_span, update_grammar
from agent.nst.config import NstConfig
from agent.nst.state import NarrativeState, same_text
from agent.store import search_ref
from agent.text import count_words

DONE = re.compile(r"\s*DONE[.!。！]?\s*")
"""The reply that ends a chapter: DONE alone, one sentence mark allowed (the reference's ``is_done_signal``)."""

UPDATE_FIELDS = ("upsert_character_state", "add_past_event", "add_future_requirement", "resolve_future_requirement")


@lru_cache(maxsize=16)
def _specs(read: int, search: int, hits: int, correct: int, spread: int, lookback: bool, state: bool) -> str:
    entries: list[dict[str, Any]] = []

    def tool(name: str, description: str, parameters: dict[str, Any], **extra: Any) -> None:
        function: dict[str, Any] = {"name": name, "description": description, "parameters": parameters, **extra}
        entries.append({"type": "function", "function": function})

    integer, string = {"type": "integer"}, {"type": "string"}
    if lookback:
        tool(
            "read",
            "Read one chapter that is already written, whole: any earlier chapter, and the current one once a "
            f"write was accepted. Budget: {read} successful reads per chapter (a refused read costs nothing).",
            {"type": "object", "properties": {"chapter_id": integer}, "required": ["chapter_id"]},
        )
        tool(
            "search",
            "Search the earlier chapters by keywords or a short phrase: the query is split into terms and sentence "
            f"windows are ranked by BM25; at most {hits} windows come back. Budget: {search} searches per chapter.",
            {"type": "object", "properties": {"query": string}, "required": ["query"]},
        )
        tool(
            "correct",
            "Fix a factual or continuity error (not style) in a written chapter, the current one or an earlier one, "
            f"by replacing old_text with new_text. Budget: {correct} corrections per chapter. Once the current "
            "chapter is corrected it cannot be written again, so settle its length first.",
            {
                "type": "object",
                "properties": {"chapter_id": integer, "old_text": string, "new_text": string},
                "required": ["chapter_id", "old_text", "new_text"],
            },
        )
    tool(
        "write",
        "Submit the complete text of the current chapter in content. One write per chapter can succeed: a draft "
        "refused for its length does not use it up, so write again until ok is true; after that, change the text "
        f"with correct. ok is true only within ±{spread}% of the chapter's target length.",
        {
            "type": "object",
            "properties": {"chapter_id": integer, "title": string, "content": string},
            "required": ["chapter_id", "title", "content"],
        },
    )
    if state:
        entry = {
            "type": "object",
            "properties": {"key": string, "description": string},
            "required": ["key", "description"],
            "additionalProperties": False,
        }
        character = {
            "type": "object",
            "properties": {"name": string, "description": string},
            "required": ["name", "description"],
            "additionalProperties": False,
        }
        tool(
            "update",
            "Record every change the finished chapter made to the narrative state, all at once and atomically, "
            "with the four arrays of the schema.",
            {
                "type": "object",
                "properties": {
                    "upsert_character_state": {"type": "array", "items": character},
                    "add_past_event": {"type": "array", "items": entry},
                    "add_future_requirement": {"type": "array", "items": entry},
                    "resolve_future_requirement": {"type": "array", "items": string},
                },
                "required": list(UPDATE_FIELDS),
                "additionalProperties": False,
            },
            strict=True,
        )
    return json.dumps(entries)


def tool_specs(session: Any, gate: Gate, hits: int) -> list[ToolSpec]:
    """The tools every native turn offers, in the reference's order (read, search, correct, write,
    update); the budgets and the length tolerance are the run's own. The same list every turn, so the
    request's prefix stays the same for the server's cache."""
    spread = round(100 * (gate.high - gate.target) / gate.target) if gate.target else 20
    specs: list[ToolSpec] = json.loads(
        _specs(
            session.read_budget,
            session.search_budget,
            hits,
            session.correct_budget,
            spread,
            session.lookback,
            session.with_state,
        )
    )
    return specs


class NativeChapter(Chapter, Protocol):
    """What a native turn needs of the chapter in flight, beyond the tools' :class:`Chapter`."""

    messages: list[Message]
    gate: Gate
    drafter: Drafter
    drafts: DraftKeeper
    ledger: ChapterLedger
    stats: dict[str, Any]
    config: NstConfig
    state: NarrativeState
    new_state: NarrativeState | None

    def native_reply(self) -> Completion:
        """One turn's reply to the conversation so far, with the tools on offer."""


@dataclass
class Outcome:
    """One call's result for the model, and the feedback a rejected write adds after the turn's results."""

    result: dict[str, Any]
    ledger_arguments: dict[str, Any]
    feedback: str | None = None


def refused(message: str, *, charged: bool | None = None) -> dict[str, Any]:
    """An error result: ``ok`` false, and for a budgeted lookup that nothing was charged."""
    return {"ok": False, **({"budget_charged": False} if charged is not None else {}), "error": message}


def take_turn(chapter: NativeChapter) -> None:
    """One native turn: ask, append the reply as the model gave it (reasoning never goes back), run every
    call in order and answer each, then the feedback of a rejected write, or a nudge for a reply that
    called nothing and did not end the chapter."""
    s = chapter.session
    reply = chapter.native_reply()
    message: Message = {"role": "assistant", "content": reply.text or ""}
    if reply.tool_calls:
        message["tool_calls"] = [call.wire() for call in reply.tool_calls]
    chapter.messages.append(message)
    where = len(chapter.messages) - 1
    if not reply.tool_calls:
        if s.written and DONE.fullmatch(reply.text or ""):
            s.finished = True
            chapter.ledger.record("finish", {"tool": "DONE"}, "chapter finished", True)
            return
        nudge = nudge_for(s)
        s.failed += 1
        chapter.ledger.record("text", {"text": (reply.text or "")[:200]}, nudge, False, "no tool call")
        chapter.messages.append({"role": "user", "content": nudge})
        return
    feedback = None
    for call in reply.tool_calls:
        outcome = run_call(chapter, call, where)
        ok = bool(outcome.result.get("ok"))
        if not ok:
            s.failed += 1
        chapter.stats["tools"][call.name] = chapter.stats["tools"].get(call.name, 0) + 1
        text = json.dumps(outcome.result, ensure_ascii=False)
        error = None if ok else outcome.result.get("error")
        chapter.ledger.record(call.name, outcome.ledger_arguments, text, ok, error)
        chapter.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        feedback = outcome.feedback or feedback
    if feedback is not None:
        chapter.messages.append({"role": "user", "content": feedback})


def nudge_for(s: Any) -> str:
    """What a reply without a tool call that does not end the chapter is told."""
    if not s.written:
        return (
            f"Chapter {s.index} has no accepted draft yet. Call write with the complete chapter inside the accepted "
            "length, then update the narrative state once with all four arrays, then reply DONE."
            if s.with_state
            else f"Chapter {s.index} has no accepted draft yet. Call write with the complete chapter inside the "
            "accepted length, then reply DONE."
        )
    return (
        "The chapter ends only on a reply that is exactly DONE, with no tool call. If the narrative state is not "
        "updated yet, call update once with all four arrays first; otherwise reply DONE now."
    )


def arguments_of(call: ToolCall) -> dict[str, Any]:
    """The call's arguments; JSON that does not parse, or is not an object, counts as none (the tool then
    refuses them as it refuses any missing argument, and the raw text stays in the history)."""
    try:
        parsed = json.loads(call.arguments or "{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def run_call(chapter: NativeChapter, call: ToolCall, where: int) -> Outcome:
    """Carry out one call of the turn whose assistant message is ``messages[where]``."""
    args = arguments_of(call)
    runner = RUNNERS.get(call.name)
    if runner is None or (call.name in ("read", "search", "correct") and not chapter.session.lookback):
        return Outcome(refused(f"unknown tool {call.name}"), {"tool": call.name})
    if call.name == "update" and not chapter.session.with_state:
        return Outcome(refused("unknown tool update"), {"tool": call.name})
    return runner(chapter, args, call, where)


def _chapter_id(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def run_read(chapter: NativeChapter, args: dict[str, Any], call: ToolCall, where: int) -> Outcome:
    s = chapter.session
    cid = _chapter_id(args.get("chapter_id"))
    logged = {"tool": "read", "chapter": args.get("chapter_id")}
    if cid is None or cid > s.index:
        return Outcome(refused("chapter_id must not be a future chapter", charged=False), logged)
    if cid == s.index and not s.written:
        return Outcome(refused("the current chapter can be read only once a write succeeded", charged=False), logged)
    if cid == s.index:
        text, title = s.accepted_text or "", s.accepted_title or ""
    else:
        row = chapter.committed(cid) if cid >= 1 else None
        if row is None:
            return Outcome(refused(f"chapter {cid} not found", charged=False), logged)
        text, title = row.text, row.title
    if s.reads >= s.read_budget:
        return Outcome(refused("read budget exhausted", charged=False), logged)
    try:
        end = chapter.read_window(text, 0, cid)
    except ToolError as exc:
        return Outcome(refused(str(exc), charged=False), logged)
    s.reads += 1
    result: dict[str, Any] = {"ok": True, "budget_charged": True, "chapter_id": cid, "name": title}
    result["content"] = text[:end]
    if end < len(text):  # fabula's: a chapter longer than the room left comes as its first page
        result["content_cut_at_character"] = end
        result["characters"] = len(text)
    return Outcome(result, logged)


def run_search(chapter: NativeChapter, args: dict[str, Any], call: ToolCall, where: int) -> Outcome:
    s = chapter.session
    query = args.get("query")
    logged = {"tool": "search", "query": query}
    if not isinstance(query, str) or not query.strip():
        return Outcome(refused("query must be a non-empty string", charged=False), logged)
    if s.searches >= s.search_budget:
        return Outcome(refused("search budget exhausted", charged=False), logged)
    s.searches += 1
    hits, events = chapter.search(query)
    found = [search_ref.hit_record(h) for h in hits]
    digested = [{"key": key, "description": text} for key, text in events]
    kept = chapter.fit_lookup([json.dumps(item, ensure_ascii=False) for item in [*found, *digested]])
    found, digested = found[: len(kept)], digested[: max(0, len(kept) - len(found))]
    result: dict[str, Any] = {"ok": True, "budget_charged": True, "query": query, "hits": found}
    result["hit_count"] = len(found)
    if digested:
        result["past_events"] = digested
    return Outcome(result, logged)


def run_correct(chapter: NativeChapter, args: dict[str, Any], call: ToolCall, where: int) -> Outcome:
    s = chapter.session
    logged = {"tool": "correct", "chapter": args.get("chapter_id"), "old": args.get("old_text")}
    if s.corrects >= s.correct_budget:
        return Outcome(
            refused(f"correct budget exhausted ({s.correct_budget}/chapter); go on to the state update and DONE"),
            logged,
        )
    cid = _chapter_id(args.get("chapter_id"))
    if cid is None:
        return Outcome(refused("chapter_id must be an integer"), logged)
    if cid > s.index:
        return Outcome(refused("chapter_id cannot be a future chapter"), logged)
    if cid == s.index and not s.written:
        return Outcome(refused("the current chapter is not written yet; call write first"), logged)
    old, new = args.get("old_text"), args.get("new_text")
    if not isinstance(old, str) or not isinstance(new, str):
        return Outcome(refused("old_text and new_text must be strings"), logged)
    before = s.accepted_text if cid == s.index else None
    fuzzy = False
    try:
        if cid != s.index:
            row = chapter.committed(cid) if cid >= 1 else None
            if row is None:
                return Outcome(refused(f"chapter {cid} not found"), logged)
            fuzzy = find_span(row.text, old) != old
        else:
            fuzzy = find_span(before or "", old) != old
        TOOLS["correct"].run(chapter, SimpleNamespace(chapter=cid, old=old, new=new, reason="continuity"))
    except ToolError as exc:
        return Outcome(refused(str(exc)), logged)
    s.corrected_current = s.corrected_current or cid == s.index
    text = s.accepted_text if cid == s.index else getattr(chapter.committed(cid), "text", "")
    return Outcome({"ok": True, "chapter_id": cid, "fuzzy": fuzzy, "word_count": count_words(text or "")}, logged)


def run_write(chapter: NativeChapter, args: dict[str, Any], call: ToolCall, where: int) -> Outcome:
    s, gate = chapter.session, chapter.gate
    title = str(args["title"]) if isinstance(args.get("title"), str) else ""
    logged: dict[str, Any] = {"tool": "write", "chapter": args.get("chapter_id"), "title": title}
    if _chapter_id(args.get("chapter_id")) != s.index:
        return Outcome(refused(f"write must target the current chapter, id {s.index}"), logged)
    if s.written:
        return Outcome(
            refused(
                "a write already succeeded for this chapter; whole-chapter writes are closed. Change it with "
                "correct, then update the state and reply DONE"
            ),
            logged,
        )
    if s.corrected_current:
        return Outcome(refused("this chapter was already corrected; a new write would discard that"), logged)
    content = args.get("content")
    if not isinstance(content, str) or not content.strip():
        return Outcome(refused("content must be a non-empty string"), logged)
    text = clean_prose(content)
    attempt = chapter.drafter.judge(text, _no_reply(), 0, None, truncated=False)
    s.attempts += 1
    if chapter.stats["first_attempt_pass"] is None:
        chapter.stats["first_attempt_pass"] = attempt.accepted
    facts = {k: v for k, v in attempt.facts().items() if k not in ("max_tokens", "min_tokens", "truncated")}
    logged.update(facts)
    chapter.ledger.event("draft", words=attempt.words, accepted=attempt.accepted)
    deviation = round(100 * (attempt.words - gate.target) / gate.target, 1) if gate.target else 0.0
    within = gate.accepts(attempt.words)
    violations = []
    if attempt.unended:
        violations.append("the chapter ends mid-sentence or without terminal punctuation")
    if attempt.repeated is not None:
        violations.append(attempt.repeated.feedback())
    verdict = (
        "The length is accepted."
        if within
        else f"The length is refused: the complete chapter must have {gate.low}-{gate.high} words."
    )
    result: dict[str, Any] = {
        "ok": attempt.accepted,
        "chapter_id": s.index,
        "word_count": attempt.words,
        "target_word_count": gate.target,
        "min_word_count": gate.low,
        "max_word_count": gate.high,
        "deviation_percent": deviation,
        "within_tolerance": within,
        "format_error": False,  # the reference's format checks are off for NstAgent; the keys stay
        "format_violations": [],
        "integrity_error": bool(violations),
        "integrity_violations": violations,
        "info": f"Wrote {attempt.words} words (target {gate.target}, deviation {deviation:+.1f}%). {verdict}",
    }
    if attempt.accepted:
        s.accepted_title, s.accepted_text = title or s.accepted_title or "", attempt.text
        if chapter.config.retry_feedback == "reference":
            logged["rejected_removed"] = chapter.drafts.settle(chapter.messages)
        return Outcome(result, logged)
    draft = Draft(title, attempt.text, attempt.words, False, gate.distance(attempt.words), where, call.id, gate.target)
    kept = logged["kept_in_context"] = chapter.drafts.reject(draft, chapter.messages)
    if chapter.config.retry_feedback == "reference" and attempt.repeated is None:
        feedback = reference_feedback(attempt.words, gate, kept=kept, unended=attempt.unended)
    else:
        feedback = attempt.feedback(gate)
    return Outcome(result, logged, feedback)


def _no_reply() -> Completion:
    """The reply object a judged native draft carries (its own reply is the whole turn's)."""
    return Completion(text="", finish_reason="tool_calls", usage=Usage(), latency_s=0.0, model="")


def run_update(chapter: NativeChapter, args: dict[str, Any], call: ToolCall, where: int) -> Outcome:
    s = chapter.session
    fields: dict[str, Any] = {}
    normalised = []
    for name in UPDATE_FIELDS:
        value = args.get(name)
        if isinstance(value, str):  # a list sent as a JSON string: read it, and say so
            try:
                value = json.loads(value)
                normalised.append(name)
            except ValueError:
                pass
        if not isinstance(value, list):
            return Outcome(
                {
                    **refused(f"{name} must be a JSON array (literal [...] or []), not a string or another value"),
                    "applied_count": 0,
                    "operation_count": 0,
                },
                {"tool": "update"},
            )
        fields[name] = value
    operations = sum(len(fields[name]) for name in UPDATE_FIELDS)
    logged = {"tool": "update", **fields}
    unknown = [k for k in fields["resolve_future_requirement"] if k not in s.open_requirements]
    fields["resolve_future_requirement"] = [k for k in fields["resolve_future_requirement"] if k not in unknown]
    grammar = update_grammar(tuple(s.open_requirements), 0, False, notes=True)
    try:
        update: Any = grammar.model_validate({"tool": "update", **fields})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)[:5])
        return Outcome(
            {**refused(f"nothing was applied (the update is atomic): {problems}"), "applied_count": 0},
            logged,
        )
    base = chapter.new_state if chapter.new_state is not None else chapter.state
    try:
        message = chapter.apply_update(update)
    except ToolError as exc:
        return Outcome({**refused(str(exc)), "applied_count": 0, "operation_count": operations}, logged)
    results = operation_results(base, fields, unknown)
    result: dict[str, Any] = {
        "ok": True,
        "applied_count": sum(r["action"] != "unchanged" for r in results),
        "valid_count": operations,
        "operation_count": operations,
        "normalised_fields": normalised,
        "results": results,
        "info": message,
    }
    return Outcome(result, logged)


def operation_results(base: NarrativeState, fields: dict[str, Any], unknown: list[str]) -> list[dict[str, Any]]:
    """One entry per operation of an applied update, in the order they ran (characters, events,
    requirements, resolutions): which part of the state it touched and how (``add``, ``edit``,
    ``resolve``; ``unchanged`` for an event or requirement already recorded under its key with the same
    text, and for a resolved key that was not open), as the reference's per-operation results."""
    known = {" ".join(name.split()).casefold() for name in base.characters}
    out: list[dict[str, Any]] = []
    for entry in fields["upsert_character_state"]:
        name = str(entry.get("name", ""))
        action = "edit" if " ".join(name.split()).casefold() in known else "add"
        out.append({"ok": True, "state_name": "character_states", "action": action, "name": name})
    for part, state_name in (("add_past_event", "past_events"), ("add_future_requirement", "future_requirements")):
        recorded = dict(getattr(base, state_name))
        for entry in fields[part]:
            key, text = entry.get("key"), str(entry.get("description", ""))
            if key in recorded and same_text(recorded[key], text):
                out.append(
                    {
                        "ok": True,
                        "state_name": state_name,
                        "action": "unchanged",
                        "key": key,
                        "info": "already recorded under this key with the same text; nothing added",
                    }
                )
                continue
            recorded.setdefault(key, text)
            out.append({"ok": True, "state_name": state_name, "action": "add", "key": key})
    for key in fields["resolve_future_requirement"]:
        out.append({"ok": True, "state_name": "future_requirements", "action": "resolve", "key": key})
    for key in unknown:
        out.append(
            {"ok": True, "state_name": "future_requirements", "action": "unchanged", "key": key, "info": "not open"}
        )
    return out


RUNNERS = {"read": run_read, "search": run_search, "correct": run_correct, "write": run_write, "update": run_update}
"""Each native tool's runner, by the name the model calls."""
