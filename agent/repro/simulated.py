"""A scripted model that lets the real pipelines run a story at its real length, for ``--estimate``.

It answers every request from the request itself, as a capable model would in shape and size:
prose of the length the request asks for (the length gate's target, or the paragraph's share of
``max_tokens``), NstAgent's tool turns on the shortest legal path (write, update, finish), the
planner's outline with each chapter's target, and every other structured reply as the smallest
instance of its schema (a critic that accepts, a narrator that selects every action). Usage is
counted as a server would report it: about four characters a prompt token, 1.3 tokens a word
of prose. The counts are a floor: no rejected draft, no read or search, no retry.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from agent.limits import CLOSING_TOKENS_PER_WORD as ENGLISH_TOKENS_PER_WORD  # typical English prose
from agent.llm.base import Request
from agent.llm.types import RawReply, ToolCall, Usage
from agent.testing.author import (
    asks_for_array,
    chapter_of,
    gate_of,
    offered,
    outline_asked,
    reference_outline,
    tool_results,
)
from agent.testing.scripted import ScriptedLLM

CHARS_PER_TOKEN = 4
PROSE_ROLES = ("nst_prose", "rollsum_chapter", "direct_story", "narrator", "baseline", "transition")
TEXT_ROLES = ("rollsum_summary", "nst_digest", "recap")
LINE = (
    "the keeper walked along the harbour wall while gulls circled over grey water and a bell rang for the "
    "drowned ships of the old town as fishermen mended nets beside quiet boats"
)
WORDS = tuple(LINE.split())


def prose(words: int, seed: int = 0) -> str:
    """``words`` words of sentences that never repeat a long passage (the repetition guard passes)."""
    out: list[str] = []
    sentence: list[str] = []
    rng = random.Random(seed)  # seeded: the same request always gets the same reply
    for i in range(words):
        sentence.append(f"Mark{seed}x{i}" if not sentence else WORDS[rng.randrange(len(WORDS))])
        if len(sentence) == 12 or i == words - 1:
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    return " ".join(out)


def _gate(request: Request) -> int | None:
    for message in reversed(request.messages):
        match = re.search(r"target (\d+) words, accepted range (\d+)-(\d+)", message["content"])
        if match:
            return int(match.group(1))
    return None


def _whole(request: Request, role: str) -> int | None:
    """A one-call story's length ("about N words long"), as much of it as ``max_tokens`` holds."""
    match = re.search(r"about (\d+) words long", request.messages[-1]["content"]) if role == "baseline" else None
    return min(int(match.group(1)), int(request.max_tokens / ENGLISH_TOKENS_PER_WORD)) if match else None


def instance(schema: dict[str, Any], defs: dict[str, Any], name: str = "", n: int = 0) -> Any:
    """The smallest valid instance of a JSON schema (preferring an accepting verdict)."""
    if "$ref" in schema:
        return instance(defs[schema["$ref"].split("/")[-1]], defs, name, n)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        values = schema["enum"]
        return "accept" if "accept" in values else values[0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if o.get("type") != "null"] or schema[key]
            return instance(options[0], defs, name, n)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: instance(v, defs, k, n) for k, v in props.items() if k in schema.get("required", list(props))}
    if kind == "array":
        return [instance(schema.get("items", {}), defs, name, n) for _ in range(schema.get("minItems", 0))]
    if kind == "boolean":
        return name == "goal_reached" and n % 4 == 0
    if kind in ("integer", "number"):
        return max(schema.get("minimum", 1), min(schema.get("maximum", 1), 1))
    return f"{name.replace('_', ' ') or 'text'} {n}: the keeper keeps the lamp lit"


class SimulatedModel(ScriptedLLM):
    """The scripted capable model, stating a context of ``context`` tokens. It keeps no request (a
    whole book's would fill memory); ``counts`` counts them per role."""

    def __init__(self, context: int | None = None) -> None:
        super().__init__(model="simulated", context=context, keep=False)

    def answer(self, request: Request) -> str | RawReply:
        role = request.role or ""
        if request.tools:
            return self.native_turn(request, self.counts[role])
        return self.reply(request, role, self.counts[role])

    def native_turn(self, request: Request, n: int) -> RawReply:
        """A native-protocol turn (``tool_protocol`` native) on the shortest path: write the chapter at its
        target, update the state once (three characters, four events, one requirement), then DONE."""
        done = {name for name, result in tool_results(request) if result.get("ok")}
        chapter = chapter_of(request)
        if "write" not in done:
            content = prose(gate_of(request)[0], n)
            call = ("write", {"chapter_id": chapter, "title": f"Chapter {chapter}", "content": content})
            words = len(content.split())
        elif "update" not in done and any(t["function"]["name"] == "update" for t in request.tools or []):
            call, words = ("update", native_state(chapter, n)), 0
        else:
            return RawReply("DONE", "stop", self.usage_of(request, "DONE"), self.model)
        arguments = json.dumps(call[1], ensure_ascii=False)
        completion = round(words * ENGLISH_TOKENS_PER_WORD) + (len(arguments) // 4 if not words else 0)
        usage = Usage(self.usage_of(request, "").prompt_tokens, 0, max(1, min(completion, request.max_tokens)))
        wired = (ToolCall(f"call_{chapter}_{n}", call[0], arguments),)
        return RawReply("", "tool_calls", usage, self.model, tool_calls=wired)

    def usage_of(self, request: Request, text: str) -> Usage:
        prompt = sum(len(m["content"]) + len(json.dumps(m.get("tool_calls") or "")) for m in request.messages)
        prompt //= CHARS_PER_TOKEN
        completion = (
            round(len(text.split()) * ENGLISH_TOKENS_PER_WORD) if request.role in PROSE_ROLES else len(text) // 4
        )
        return Usage(prompt, 0, max(1, min(completion, request.max_tokens)))

    def reply(self, request: Request, role: str, n: int) -> str:
        schema = request.constraint.json_schema if request.constraint is not None else None
        if role == "plan_outline":
            return self.outline(request, schema)
        if role.startswith("plan_"):
            return prose(40, n)
        if schema is not None and role in ("narrator", "goal"):
            return self.with_prose(request, schema, n)
        if role in PROSE_ROLES:
            target = _gate(request) or _whole(request, role)
            if target is None:
                share = request.min_tokens or request.max_tokens // 2
                target = max(20, int(min(share, 400) / ENGLISH_TOKENS_PER_WORD))
            self.last_prose = prose(target, n)
            return self.last_prose
        if role in TEXT_ROLES:
            return prose(60, n)
        if schema is None:
            return prose(30, n)
        tools = offered(request)
        if tools or role == "nst_turn":
            return self.turn(tools, schema, n)
        return json.dumps(instance(schema, schema.get("$defs", {}), n=n))

    def with_prose(self, request: Request, schema: dict[str, Any], n: int) -> str:
        """A JSON reply that carries prose (Magnet's one-call narrator and goal generator): the smallest
        instance of its schema, its paragraph or transition of about half the reply's budget."""
        reply = instance(schema, schema.get("$defs", {}), n=n)
        for key in ("paragraph", "transition"):
            if key in reply:
                reply[key] = prose(max(20, int(min(request.max_tokens // 2, 400) / ENGLISH_TOKENS_PER_WORD)), n)
        return json.dumps(reply)

    def outline(self, request: Request, schema: Any) -> str:
        chapters, words = outline_asked(request)
        if asks_for_array(request):  # the reference's outline: a free reply holding a JSON array from 0
            return reference_outline(chapters, words)
        try:
            choices = schema["$defs"]["OutlineChapter"]["properties"]["target_words"]["enum"]
        except (KeyError, TypeError):
            choices = [round(words / chapters)]
        target = min(choices, key=lambda c: abs(c - words / chapters))
        return json.dumps(
            {
                "title": "The Keeper",
                "chapters": [
                    {
                        "id": i,
                        "title": f"Part {i}",
                        "description": f"Things happen in part {i}.",
                        "target_words": target,
                    }
                    for i in range(1, chapters + 1)
                ],
            }
        )

    last_prose = ""
    """The last prose reply (the chapter in flight): an update's evidence quotes it."""

    def turn(self, tools: list[str], schema: dict[str, Any], n: int) -> str:
        """Write, then update, then finish (past the turn cap, the fallback update's shape)."""
        defs = schema.get("$defs", {})
        if "write" in tools:
            return json.dumps({"tool": "write", "title": f"Chapter {n}"})
        if "update" in tools:
            return json.dumps(_quoted(self.update(schema, defs, n), self.last_prose))
        if "finish" in tools:
            return json.dumps({"tool": "finish"})
        return json.dumps(instance(schema, defs, n=n))

    def update(self, schema: dict[str, Any], defs: dict[str, Any], n: int) -> dict[str, Any]:
        """A state update of realistic size: three characters, four events, one requirement."""
        branch = next(
            o for o in _branches(schema, defs) if (o.get("properties") or {}).get("tool", {}).get("const") == "update"
        )
        props = branch["properties"]
        out: dict[str, Any] = {"tool": "update"}
        sizes = {"upsert_character_state": 3, "add_past_event": 4, "add_future_requirement": 1}
        for key, spec in props.items():
            if key == "tool":
                continue
            item = spec.get("items") if spec.get("type") == "array" else None
            count = sizes.get(key, 0)
            out[key] = (
                [_keyed(instance(item, defs, key, n), key, n, k) for k in range(count)]
                if item
                else instance(spec, defs, key, n)
            )
        return out


def native_state(chapter: int, n: int) -> dict[str, Any]:
    """A native update's arguments of realistic size: three characters, four events, one requirement."""
    text = "the keeper keeps the lamp lit while the storm gathers over the harbour"
    return {
        "upsert_character_state": [
            {"name": f"Character {k}", "description": f"After chapter {chapter}: {text}."} for k in range(3)
        ],
        "add_past_event": [{"key": f"ch{chapter}_event_{k}", "description": f"Event {k}: {text}."} for k in range(4)],
        "add_future_requirement": [{"key": f"promise_{chapter}_{n}", "description": f"Later, {text}."}],
        "resolve_future_requirement": [],
    }


def _branches(schema: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    options = schema.get("anyOf") or schema.get("oneOf") or [schema]
    return [defs[o["$ref"].split("/")[-1]] if "$ref" in o else o for o in options]


def _keyed(entry: Any, kind: str, n: int, k: int) -> Any:
    """Distinct keys and names so every entry is new (the state grows as a real one does)."""
    if isinstance(entry, dict):
        for field in ("key", "name"):
            if field in entry:
                entry[field] = f"{kind}_{n}_{k}" if field == "key" else f"Character {k}"
    return entry


def _quoted(update: dict[str, Any], chapter: str) -> dict[str, Any]:
    """Every ``evidence`` field a passage of the chapter (the default profile checks the quotes)."""
    sentences = [x for x in re.split(r"(?<=\.)\s+", chapter) if len(x.split()) >= 6] or ["(no text)"]
    k = 0
    for entries in update.values():
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and "evidence" in entry:
                entry["evidence"] = " ".join(sentences[(k * 7) % len(sentences)].split()[:8])
                k += 1
    return update
