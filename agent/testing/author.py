"""A deterministic scripted author for NstAgent control-flow tests (and the benchmarks).

It answers each request from the request itself: the planner stages, the outline (sized from
the prompt), one tool call per turn chosen by a policy from the tools the turn's grammar
offers, chapter prose of a chosen length (a revision opens with the writer's note, so a test sees it was
followed), and state updates of realistic size.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable
from typing import Any

from agent.llm.base import Request
from agent.llm.types import RawReply, ToolCall, Usage
from agent.testing.scripted import ScriptedLLM
from agent.text import count_words

_LINE = (
    "the lantern keeper walked along the harbour wall while gulls circled over grey water and "
    "somewhere below a bell rang for the drowned ships of the old town; salt wind pressed cold "
    "against shuttered windows as fishermen mended torn nets beside quiet boats, and a child "
    "counted copper coins under flickering lamps near the chapel steps"
)
WORDS = tuple(re.findall(r"[^\s;,]+", _LINE))
BOOK_TITLE = "The Bell Keeper"
"""The title every scripted outline gives the book."""


def offered(request: Request) -> list[str]:
    """Tool names the request's grammar allows (scans for the ``tool`` const)."""
    schema = request.constraint.json_schema if request.constraint else None
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            tool = node.get("properties", {}).get("tool") if isinstance(node.get("properties"), dict) else None
            if isinstance(tool, dict) and "const" in tool:
                found.append(tool["const"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return found


def last_user(request: Request) -> str:
    return next(m["content"] for m in reversed(request.messages) if m["role"] == "user")


def gate_of(request: Request) -> tuple[int, int, int]:
    """(target, low, high) from the prose request or the chapter prompt (the native prompt states the
    target and ±20 %)."""
    for message in reversed(request.messages):
        match = re.search(r"target (\d+) words, accepted range (\d+)-(\d+)", message["content"])
        if match:
            return int(match.group(1)), int(match.group(2)), int(match.group(3))
    native = re.search(r"\nLength: (\d+) words; .*±(\d+)%", request.messages[1]["content"])
    if native:
        target, spread = int(native.group(1)), int(native.group(2)) / 100
        return target, math.ceil((1 - spread) * target), math.floor((1 + spread) * target)
    raise AssertionError("no gate in the conversation")


def chapter_of(request: Request) -> int:
    match = re.search(r"# Current task\n(?:Write chapter |Chapter id: )(\d+)", request.messages[1]["content"])
    return int(match.group(1)) if match else 0


def prose(words: int, seed: int = 0) -> str:
    """``words`` words of sentences (a blank line every ~60 words)."""
    out: list[str] = []
    sentence: list[str] = []
    rng = random.Random(seed)
    for i in range(words):
        # a deterministic but non-looping word sequence: the repetition guard rejects a loop
        sentence.append(f"Mark{len(out)}" if not sentence else WORDS[rng.randrange(len(WORDS))])
        if len(sentence) == 12 or i == words - 1:
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
            if len(out) % 5 == 0:
                out.append("\n\n")
    return " ".join(out).replace(" \n\n ", "\n\n").strip()


NOTE_HEADING = "# The writer's note\n"
"""Where a revision request gives the writer's note (``agent.nst.revise.rewrite``)."""


def note_of(request: Request) -> str | None:
    """The writer's note of a revision request, if the request is one."""
    for message in request.messages:
        if message["role"] == "user" and NOTE_HEADING in message["content"]:
            return message["content"].split(NOTE_HEADING, 1)[1].split("\n\n", 1)[0].strip()
    return None


def following(note: str, words: int, seed: int) -> str:
    """A revision that follows ``note`` detectably: the note itself opens the chapter (as one sentence),
    then the chapter's own prose, the whole ``words`` long."""
    sentence = note.rstrip(".") + "."
    return sentence + " " + prose(max(1, words - count_words(sentence)), seed=seed)


def fixed_passage(asked: str) -> str:
    """``fabula lint --fix``'s rewrite, scripted: the passage with each flagged phrase taken out."""
    passage = asked.split("Passage:\n", 1)[1].rsplit("\n\nReply with", 1)[0]
    for phrase in re.findall(r'^- [\w-]+: "(.*)"$', asked, re.MULTILINE):
        passage = re.sub(r"\s+".join(map(re.escape, phrase.split())), "", passage, flags=re.IGNORECASE)
    return re.sub(r" {2,}", " ", passage).strip()


def open_requirements(request: Request) -> list[str]:
    """Keys of the open requirements listed in the chapter prompt (headed text, or the state as JSON)."""
    text = request.messages[1]["content"]
    if '"future_requirements": [' in text:
        block = text.split('"future_requirements": [', 1)[1].split("\n  ]", 1)[0]
        return re.findall(r'"key": "([^"]+)"', block)
    if "Open future requirements" not in text:
        return []
    block = text.split("Open future requirements", 1)[1].split("\n\n", 1)[0]
    return [next(iter(json.loads(line))) for line in block.splitlines()[1:] if line.startswith("{")]


def chapter_text(request: Request) -> str:
    """The accepted chapter in the conversation (the last prose reply), for evidence quotes."""
    for message in reversed(request.messages):
        content = message["content"]
        if message["role"] == "assistant" and not content.startswith(("{", "[rejected")):
            return content
    return ""


def quotes_from(text: str, n: int) -> list[str]:
    """``n`` short passages copied from ``text`` (whitespace changed, as a model copying through JSON would)."""
    sentences = [s.strip() for s in re.split(r"(?<=\.)\s+", text) if len(s.split()) >= 6]
    if not sentences:
        return ["(no text)"] * n
    return ["  ".join(sentences[(k * 7) % len(sentences)].split()[:8]) for k in range(n)]


def update_json(
    chapter: int,
    *,
    events: int = 4,
    characters: int = 3,
    cast: int = 8,
    requirement: bool = True,
    resolve: list[str] | None = None,
    text: str = "",
    facts: int = 0,
) -> str:
    quotes = iter(quotes_from(text, characters + events + 1) if text else [])
    snaps = []
    for j in range(characters):
        who = (chapter * characters + j) % cast
        snaps.append(
            {
                "name": f"Character {who}",
                "location": f"the harbour district, pier {chapter}",
                "goal": "find the missing lantern before the storm",
                "relationships": "sister of the keeper",
                "knowledge": f"knows what happened in chapter {chapter}",
                "possessions": "a brass key",
                "condition": "tired but determined",
                "facts": [
                    {"key": key, "value": value}
                    for key, value in [
                        ("age", f"{30 + who}"),
                        ("birth_date", f"{who + 1} March {1990 - who}"),
                        ("appearance", "grey coat, a scar over the left eyebrow, very tall"),
                        ("title", "harbour pilot"),
                        ("aliases", f"the pilot; Mister {who}"),
                    ][:facts]
                ],
                "evidence": next(quotes, "the keeper said so"),
            }
        )
    resolve = resolve or []
    return json.dumps(
        {
            "tool": "update",
            "upsert_character_state": snaps,
            "add_past_event": [
                {
                    "key": f"ch{chapter}_event_{k}",
                    "description": f"In chapter {chapter} event {k} "
                    "happened at the pier, witnessed by the keeper and two sailors.",
                    "evidence": next(quotes, "the keeper said so"),
                }
                for k in range(events)
            ],
            "add_future_requirement": [
                {
                    "key": f"promise_{chapter}",
                    "description": "The bell must ring again.",
                    "evidence": next(quotes, "the keeper said so"),
                }
            ]
            if requirement
            else [],
            "resolve_future_requirement": resolve,
        }
    )


def outline_json(request: Request) -> str:
    """An outline as the planner asks for it, with targets from the grammar's closed choices
    (closest to an even share), as a constrained decoder would have to pick them. The paper
    profile's free outline asks for "approximately N" chapters "within ±20% of W words"; its
    reference outline (no grammar) "about N chapters" of a "W words" novel as a JSON array from 0,
    answered as :func:`reference_outline`."""
    chapters, words = outline_asked(request)
    if asks_for_array(request):
        return reference_outline(chapters, words)
    per = words / chapters
    choices = per_chapter_choices(request) or [round(per)]
    target = min(choices, key=lambda c: abs(c - per))
    return json.dumps(
        {
            "title": BOOK_TITLE,
            "chapters": [
                {"id": i, "title": f"Part {i}", "description": f"Things happen in part {i}.", "target_words": target}
                for i in range(1, chapters + 1)
            ],
        }
    )


def outline_asked(request: Request) -> tuple[int, int]:
    """The chapters and the words an outline request asks for (the latest user message that asks:
    a re-ask of the reference's outline names only the error)."""
    for text in (m["content"] for m in reversed(request.messages) if m["role"] == "user"):
        chapters = re.search(r"(?:exactly|approximately|Plan about) (\d+) (?:chapters|\()", text)
        words = re.search(r"(?:must sum to (?:within ±20% of )?|novel should come to )(\d+) words", text)
        if chapters is not None and words is not None:
            return int(chapters.group(1)), int(words.group(1))
    raise AssertionError(f"not an outline request: {last_user(request)[-300:]}")


def asks_for_array(request: Request) -> bool:
    """True for the reference's outline request (``outline_style`` "reference"): no grammar, and the
    first user message shows the array's first chapter numbered 0."""
    first = next((m["content"] for m in request.messages if m["role"] == "user"), "")
    return request.constraint is None and '{"id": 0, "name"' in first


def reference_outline(chapters: int, words: int, title: str = "Part") -> str:
    """The reference's outline as a model writes it: a line of its own, then the JSON array (ids from 0,
    ``name``, ``description``, ``word_count`` an even share) in a fenced block."""
    share = round(words / chapters)
    array = [
        {"id": i, "name": f"{title} {i + 1}", "description": f"Things happen in part {i + 1}.", "word_count": share}
        for i in range(chapters)
    ]
    return f"Here is the chapter outline.\n\n```json\n{json.dumps(array, indent=2)}\n```"


def per_chapter_choices(request: Request) -> list[int] | None:
    schema: Any = request.constraint.json_schema if request.constraint is not None else None
    try:
        return schema["properties"]["chapters"]["prefixItems"][0]["properties"]["target_words"]["enum"]
    except (KeyError, IndexError, TypeError):
        return None


Policy = Callable[[Request, list[str]], str]


def without_evidence(update: str, request: Request) -> str:
    """The update as the grammar asks for it: the paper profile's has no ``evidence`` fields, and its
    characters are ``{name, description}`` entries (``state_style`` "reference")."""
    schema = request.constraint.json_schema if request.constraint else None
    if schema is None:
        return update
    text = json.dumps(schema)
    data = json.loads(update)
    if '"location"' not in text and '"CharacterNote' in text:
        data["upsert_character_state"] = as_notes(data.get("upsert_character_state", []))
    if '"evidence"' not in text:
        for name in ("upsert_character_state", "add_past_event", "add_future_requirement"):
            for entry in data.get(name, []):
                entry.pop("evidence", None)
    return json.dumps(data)


def as_notes(characters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Typed character snapshots as ``{name, description}`` entries (an ``evidence`` quote kept)."""
    return [
        {
            "name": c["name"],
            "description": f"At {c['location']}, {c['condition']}; wants to {c['goal']}; {c['relationships']}; "
            f"{c['knowledge']}; carries {c['possessions']}.",
            **({"evidence": c["evidence"]} if "evidence" in c else {}),
        }
        for c in characters
    ]


def default_policy(request: Request, tools: list[str]) -> str:
    """Write, then update, then finish: the shortest legal path (past the turn cap, the one-event
    fallback update)."""
    if not tools:
        quote = quotes_from(chapter_text(request), 1)[0]
        return json.dumps(
            {
                "add_past_event": [
                    {
                        "key": f"ch{chapter_of(request)}_fallback",
                        "description": "The chapter happened.",
                        "evidence": quote,
                    }
                ]
            }
        )
    for tool in ("write", "update", "finish"):
        if tool in tools:
            if tool == "write":
                return json.dumps({"tool": "write", "title": f"Chapter {chapter_of(request)}"})
            if tool == "update":
                keys = open_requirements(request)
                return without_evidence(
                    update_json(
                        chapter_of(request), resolve=keys[:1] if len(keys) >= 3 else [], text=chapter_text(request)
                    ),
                    request,
                )
            return json.dumps({"tool": "finish"})
    raise AssertionError(f"nothing to do with {tools}")


NativeCall = tuple[str, dict[str, Any]]
NativePolicy = Callable[["Author", Request], tuple[str, list[NativeCall]]]
"""A native turn's answer: the reply's text and its tool calls (name, arguments)."""


def tool_results(request: Request) -> list[tuple[str, dict[str, Any]]]:
    """Every tool result of the conversation so far, in order: the tool's name and its JSON result."""
    names: dict[str, str] = {}
    found: list[tuple[str, dict[str, Any]]] = []
    for message in request.messages:
        for call in message.get("tool_calls") or []:
            names[call["id"]] = call["function"]["name"]
        if message["role"] == "tool":
            try:
                result = json.loads(message["content"])
            except ValueError:
                result = {}
            found.append((names.get(message["tool_call_id"], "?"), result if isinstance(result, dict) else {}))
    return found


def native_update(request: Request) -> dict[str, Any]:
    """The update a native turn sends: the four arrays, characters as ``{name, description}``, no quotes."""
    keys = open_requirements(request)
    data = json.loads(update_json(chapter_of(request), resolve=keys[:1] if len(keys) >= 3 else []))
    data.pop("tool")
    data["upsert_character_state"] = as_notes(data["upsert_character_state"])
    for name in ("add_past_event", "add_future_requirement"):
        for entry in data[name]:
            entry.pop("evidence", None)
    for entry in data["upsert_character_state"]:
        entry.pop("evidence", None)
    return data


def native_policy(author: Author, request: Request) -> tuple[str, list[NativeCall]]:
    """The path the reference kit's fake model takes: chapter 2 first reads chapter 1, a later chapter
    first searches; then write (until accepted), update once, then DONE."""
    results = tool_results(request)
    offered_tools = {tool["function"]["name"] for tool in request.tools or []}
    chapter = chapter_of(request)
    if not any(name in ("read", "search") for name, _ in results):
        if chapter == 2 and "read" in offered_tools:
            return "", [("read", {"chapter_id": 1})]
        if chapter > 2 and "search" in offered_tools:
            return "", [("search", {"query": "the bell in the harbour"})]
    if not any(name == "write" and r.get("ok") for name, r in results):
        return "", [("write", author.native_draft(request))]
    if "update" in offered_tools and not any(name == "update" and r.get("ok") for name, r in results):
        return "", [("update", native_update(request))]
    return "DONE", []


class Author(ScriptedLLM):
    """The scripted model. ``policy`` picks tool calls, ``length`` sizes each prose reply."""

    def __init__(
        self,
        policy: Policy = default_policy,
        length: Callable[[Request, int], int | tuple[int, str]] | None = None,
        tokens_per_word: float = 1.3,
        native: NativePolicy = native_policy,
    ) -> None:
        super().__init__(model="scripted-author")
        self.policy = policy
        self.native = native
        self.length = length or (lambda request, attempt: gate_of(request)[0])
        self.tokens_per_word = tokens_per_word
        self.prose_attempts: dict[int, int] = {}

    def choose_draft(self, request: Request) -> str:
        """The drafts judge, scripted: the last draft shown, with a one-line reason."""
        last = drafts_shown(request)[-1]
        return json.dumps({"draft": last, "reason": f"draft {last} carries out the outline item most closely"})

    def native_draft(self, request: Request) -> dict[str, Any]:
        """A native ``write`` call's arguments: the chapter's prose sized by ``length`` (one more attempt each)."""
        chapter = chapter_of(request)
        attempt = self.prose_attempts.get(chapter, 0)
        self.prose_attempts[chapter] = attempt + 1
        size = self.length(request, attempt)
        size = size[0] if isinstance(size, tuple) else size
        return {"chapter_id": chapter, "title": f"Chapter {chapter}", "content": prose(size, seed=chapter)}

    def native_answer(self, request: Request) -> RawReply:
        """A native turn (the request offers ``tools``): the policy's calls, counted as a server counts them;
        calls longer than ``max_tokens`` are cut as a server cuts them, into text that holds no call."""
        text, calls = self.native(self, request)
        turn = sum(1 for m in request.messages if m["role"] == "assistant")
        wired = tuple(
            ToolCall(f"call_{chapter_of(request)}_{turn}_{i}", name, json.dumps(args, ensure_ascii=False))
            for i, (name, args) in enumerate(calls)
        )
        prompt = sum(len(str(m.get("content") or "")) for m in request.messages) // 4
        words = sum(count_words(str(args.get("content", ""))) for _, args in calls)
        completion = max(1, round(words * self.tokens_per_word) + sum(len(c.arguments) for c in wired) // 40)
        if completion > request.max_tokens:
            cut = "".join(f"<tool_call>{c.arguments}" for c in wired)[: request.max_tokens * 4]
            return RawReply(cut, "length", Usage(prompt, 0, request.max_tokens), self.model)
        finish = "tool_calls" if wired else "stop"
        return RawReply(text, finish, Usage(prompt, 0, completion), self.model, tool_calls=wired)

    def answer(self, request: Request) -> RawReply:
        """:meth:`reply`, counted as a server counts it and cut at ``max_tokens`` as a server cuts it."""
        if request.tools:
            return self.native_answer(request)
        text, finish = self.reply(request)
        prompt = sum(len(m["content"]) for m in request.messages) // 4
        prose_role = request.role in ("nst_prose", "rollsum_chapter", "direct_story")
        completion = max(1, round(count_words(text) * self.tokens_per_word)) if prose_role else max(1, len(text) // 4)
        if completion > request.max_tokens:  # as a server does: the reply stops at max_tokens
            if prose_role:
                text = " ".join(text.split()[: int(request.max_tokens / self.tokens_per_word)])
            else:
                text = text[: request.max_tokens * 4]
            completion, finish = request.max_tokens, "length"
        return RawReply(text=text, finish_reason=finish, usage=Usage(prompt, 0, completion), model=self.model)

    def reply(self, request: Request) -> tuple[str, str]:
        role = request.role or ""
        if role == "plan_outline":
            return outline_json(request), "stop"
        if role.startswith("plan_"):
            return f"A {role[5:]} of the story. " + prose(40), "stop"
        if role in ("nst_prose", "rollsum_chapter", "direct_story"):
            key = chapter_of(request) if role == "nst_prose" else len(self.requests)
            attempt = self.prose_attempts.get(key, 0)
            self.prose_attempts[key] = attempt + 1
            size = self.length(request, attempt)
            finish = "stop"
            if isinstance(size, tuple):
                size, finish = size
            note = note_of(request) if role == "nst_prose" else None
            return (following(note, size, key) if note else prose(size, seed=key)), finish
        if role == "lint_fix":
            return fixed_passage(last_user(request)), "stop"
        if role == "rollsum_summary":
            return "Summary so far: " + prose(50), "stop"
        if role == "nst_digest":
            return "Digest: " + prose(60, seed=len(self.requests)), "stop"
        if role == "reconcile_judge":
            return judge_json(request), "stop"
        if role == "drafts_judge":
            return self.choose_draft(request), "stop"
        if role == "style_description":
            return json.dumps({"description": "Measured, ironic narration; long balanced sentences."}), "stop"
        return self.policy(request, offered(request)), "stop"


def drafts_shown(request: Request) -> list[int]:
    """The draft numbers a drafts judge's request shows."""
    return [int(k) for k in re.findall(r"^## Draft (\d+) \(", last_user(request), re.MULTILINE)]


def judge_json(request: Request) -> str:
    """``fabula reconcile``'s continuity judge, scripted: a character of the state with a
    ``former_name`` fact is contradicted by every sentence of the chapter that still uses that name
    (each quoted exactly)."""
    asked = last_user(request)
    state, _, rest = asked.partition("written before that edit:\n")
    chapter = rest.split("\n\nList every passage", 1)[0]
    renamed = []
    for line in state.splitlines():
        if line.startswith('{"name"'):
            entry = json.loads(line)
            facts = entry.get("facts") or {}
            facts = facts if isinstance(facts, dict) else {f["key"]: f["value"] for f in facts}
            renamed += [(entry["name"], facts["former_name"])] if "former_name" in facts else []
    found = []
    for sentence in re.split(r"(?<=\.)\s+", chapter):
        for name, former in renamed:
            if former in sentence:
                found.append(
                    {
                        "quote": sentence.strip(),
                        "state": f"{former} is now called {name}",
                        "explanation": f"the chapter still calls {name} {former}",
                    }
                )
    return json.dumps({"contradictions": found[:8]})
