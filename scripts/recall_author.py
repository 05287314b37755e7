"""The scripted author of the recall benchmark: the long-haul bench's capable author
(``scripts/bench_longhaul.py``: lookups, rejected drafts, corrections, updates of realistic size)
that also plants and needs the facts of ``scripts/recall_facts.py``.

What it does beyond the long-haul author:

- **Outline**: each chapter's description names the facts it plants and needs by subject
  (``"Ada Venn's debt matters again."``), never by needle.
- **Prose**: a chapter states the fact it plants (its statement, at a point 20-80 % through the
  chapter, so a paged read may miss it). A chapter that needs a fact writes the needle only when
  its prompt carried it; otherwise it names the subject and leaves the detail out (a careful
  writer invents nothing). Direct's one reply is the story with ``Chapter k`` headings, planted
  and using facts the same way (its own earlier text is in its context).
- **Lookups** (NstAgent): before writing, for each needed fact its conversation lacks, one search
  for the subject (``"Ada Venn owed harbour master debt"``); if no result holds the needle, it
  reads the earliest chapter a result names the person in, page by page while its read budget
  lasts. Then it spends what is left of its budgets as the long-haul author does, except that a
  lookup the budget refuses for lack of room is not asked again in that chapter (the error says
  to continue with the chapter).
- **Updates**: a planted eye colour goes into the person's character facts, a debt or a secret
  into a past event, a promise into an open requirement (resolved at the last chapter that
  needs it); a person a chapter plants or needs is upserted with the facts its prompt's state
  shows for them (the system prompt says to repeat the facts that still hold).
- **Digests and RollSum summaries** (the model's rewrites): a rewrite keeps the statement of
  each fact its input holds, except that each kept fact is paraphrased away with probability
  ``drift`` per rewrite (hash-chosen, so runs repeat): the paper's Appendix E finds that
  rewritten summaries lose exact values by paraphrase, not for lack of room. A digest holds at
  most the 120 words its prompt asks for, statements in input order; a summary grows by about
  90 words a chapter (the paper's summaries: 4,278 words by chapter 36).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from agent.llm.base import Request
from agent.nst.consolidate import DIGEST_WORDS
from agent.quotes import normalize
from agent.testing.author import chapter_of, chapter_text, open_requirements, prose, without_evidence
from scripts.bench_longhaul import LonghaulAuthor
from scripts.recall_facts import Fact, needed_in, planted_in, script

SUMMARY_WORDS_PER_CHAPTER = 90
_CHAPTERS = re.compile(r"# Outline \((\d+) chapters|exactly (\d+) chapters|approximately (\d+) chapters")


def conversation(request: Request) -> str:
    return normalize("\n".join(m["content"] for m in request.messages))


def people_in_state(prompt: str) -> dict[str, dict[str, str]]:
    """Each character's facts as the chapter prompt's state shows them."""
    if "Characters (current snapshot of each):" not in prompt:
        return {}
    block = prompt.split("Characters (current snapshot of each):", 1)[1].split("\n\n", 1)[0]
    people = {}
    for line in block.splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            people[entry["name"]] = dict(entry.get("facts") or {})
    return people


class RecallAuthor(LonghaulAuthor):
    """The long-haul author that plants and needs facts (see the module docstring)."""

    def __init__(self, tokenizer: Any, name: str, *, drift: float = 0.03, chapters: int | None = None) -> None:
        super().__init__(tokenizer, name)
        self.drift = drift
        self.facts: list[Fact] = script(chapters) if chapters else []

    def _learn(self, request: Request) -> None:
        """The fact script follows the outline's chapter count, however the run learns it."""
        if self.facts:
            return
        for message in request.messages:
            match = _CHAPTERS.search(message["content"])
            if match:
                self.facts = script(int(next(g for g in match.groups() if g)))
                return

    def drifted(self, fact: Fact, rewrite: str) -> bool:
        digest = hashlib.sha256(f"{fact.key}|{rewrite}".encode()).digest()
        return int.from_bytes(digest[:4], "big") / 2**32 < self.drift

    # -- replies ---------------------------------------------------------------------------
    def reply(self, request: Request) -> tuple[str, str]:
        self._learn(request)
        role = request.role or ""
        if role == "plan_outline":
            text, finish = super().reply(request)
            data = json.loads(text)
            facts = script(len(data["chapters"]))
            for c in data["chapters"]:
                cues = [f.plant_cue for f in planted_in(facts, c["id"])] + [f.cue for f in needed_in(facts, c["id"])]
                c["description"] = " ".join([c["description"], *cues])
            return json.dumps(data), finish
        if role == "nst_digest":
            return self.digest(request), "stop"
        if role == "rollsum_summary":
            return self.summary(request), "stop"
        if role == "direct_story":
            text, finish = super().reply(request)
            return self.story(text), finish
        text, finish = super().reply(request)
        if role in ("nst_prose", "rollsum_chapter"):
            text = self.chapter(text, chapter_of(request), conversation(request))
        return text, finish

    def uses(self, chapter: int, known: str) -> list[str]:
        """What a chapter says of the facts it needs: the statement if the writer has the needle."""
        return [f.statement if normalize(f.needle) in known else f.mention for f in needed_in(self.facts, chapter)]

    def chapter(self, text: str, chapter: int, known: str) -> str:
        """``text`` with the chapter's planted statement and its uses of needed facts inserted."""
        paragraphs = text.split("\n\n")
        at = len(paragraphs) * ((chapter * 37) % 61 + 20) // 100
        for fact in planted_in(self.facts, chapter):
            paragraphs[at] = f"{paragraphs[at]} {fact.statement}"
        uses = self.uses(chapter, known)
        if uses:
            paragraphs[at // 2] = " ".join([paragraphs[at // 2], *uses])
        return "\n\n".join(paragraphs)

    def story(self, text: str) -> str:
        """Direct's story: ``text`` cut into the script's chapters, each headed ``Chapter k``."""
        chapters = len(self.facts) + 1
        paragraphs = text.split("\n\n")
        per = max(1, len(paragraphs) // chapters)
        parts, written = [], ""
        for k in range(1, chapters + 1):
            body = "\n\n".join(paragraphs[(k - 1) * per : k * per if k < chapters else len(paragraphs)]) or "Mark0."
            part = f"Chapter {k}\n\n{self.chapter(body, k, normalize(written))}"
            parts.append(part)
            written += "\n\n" + part
        return "\n\n".join(parts)

    def rewrite(self, source: str, fresh: str, rewrite: str) -> list[str]:
        """Statements a rewrite keeps: each fact ``source`` holds (the earlier summary or events)
        unless it drifts, and each fact ``fresh`` holds (the new chapter: no drift yet)."""
        source, fresh = normalize(source), normalize(fresh)
        kept = []
        for fact in self.facts:
            needle = normalize(fact.needle)
            if needle in fresh or (needle in source and not self.drifted(fact, rewrite)):
                kept.append(fact.statement)
        return kept

    def digest(self, request: Request) -> str:
        prompt = request.messages[-1]["content"]
        statements = self.rewrite(prompt, "", f"digest {len(self.requests)}")
        words = ["In", "these", "chapters", "the", "keeper", "answered", "the", "bell."]
        for statement in statements:
            if len(words) + len(statement.split()) > DIGEST_WORDS:
                break
            words += statement.split()
        filler = prose(max(0, DIGEST_WORDS - 10 - len(words)), seed=len(self.requests)).split()
        return " ".join(words + filler)

    def summary(self, request: Request) -> str:
        prompt = request.messages[-1]["content"]
        match = re.search(r"(?:New chapter|Newly completed Chapter) (\d+)", prompt)
        index = int(match.group(1)) if match else 1
        cut = match.start() if match else 0
        statements = self.rewrite(prompt[:cut], prompt[cut:], f"summary {index}")
        return " ".join(["Summary so far:", *statements, prose(SUMMARY_WORDS_PER_CHAPTER * index, seed=index)])

    # -- tool calls ------------------------------------------------------------------------
    def turn(self, request: Request, tools: list[str]) -> str:
        self._learn(request)
        tools = [t for t in tools if t not in self.refused_for_room(request)]
        if "write" in tools:
            call = self.lookup(request, chapter_of(request), tools)
            if call is not None:
                return json.dumps(call)
        return super().turn(request, tools)

    @staticmethod
    def refused_for_room(request: Request) -> set[str]:
        """Lookups the budget refused in this chapter for lack of room: the author heeds "continue
        with the chapter" and stops asking (the long-haul author would ask again until the turn cap)."""
        refused = set()
        for message in request.messages:
            if message["role"] == "user" and "there is no room in the context for a read" in message["content"]:
                refused.add("read")
            if message["role"] == "user" and "there is no room in the context for search results" in message["content"]:
                refused.add("search")
        return refused

    def lookup(self, request: Request, chapter: int, tools: list[str]) -> dict[str, Any] | None:
        """The next search or read for a needed fact the conversation lacks (None: none left)."""
        known = conversation(request)
        calls = [
            json.loads(m["content"])
            for m in request.messages
            if m["role"] == "assistant" and m["content"].startswith("{")
        ]
        queries = {c.get("query") for c in calls if c.get("tool") == "search"}
        for fact in needed_in(self.facts, chapter):
            if normalize(fact.needle) in known:
                continue
            if "search" in tools and fact.query not in queries:
                return {"tool": "search", "query": fact.query}
            if "read" in tools:
                read = self.read_for(request, fact, calls)
                if read is not None:
                    return read
        return None

    @staticmethod
    def read_for(request: Request, fact: Fact, calls: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Continue the read under way, else read the earliest chapter a search result names ``fact``'s
        person in that has not been read yet."""
        last = next((m["content"] for m in reversed(request.messages) if m["role"] == "user"), "")
        more = re.search(r"To continue, read chapter (\d+) with offset (\d+)", last)
        if more and calls and calls[-1].get("tool") == "read":
            return {"tool": "read", "chapter": int(more.group(1)), "offset": int(more.group(2))}
        read = {c.get("chapter") for c in calls if c.get("tool") == "read"}
        named = sorted(
            {
                int(c)
                for m in request.messages
                if m["role"] == "user"
                for c, passage in re.findall(r"^\[chapter (\d+)\] (.*)$", m["content"], re.MULTILINE)
                if fact.person in passage
            }
        )
        target = next((c for c in named if c not in read), None)
        return None if target is None else {"tool": "read", "chapter": target, "offset": 0}

    def update(self, request: Request, chapter: int, calls: list[dict]) -> str:  # type: ignore[override]
        data = json.loads(LonghaulAuthor.update(request, chapter, calls))
        prompt = request.messages[1]["content"]
        people = people_in_state(prompt)
        planted = planted_in(self.facts, chapter)
        needed = needed_in(self.facts, chapter)
        known = normalize(chapter_text(request))
        for fact in planted:
            entry = {"key": fact.key, "description": fact.statement, "evidence": fact.statement}
            if fact.kind in ("debt", "secret"):
                data["add_past_event"].append(entry)
            elif fact.kind == "promise":
                data["add_future_requirement"].append(entry)
        persons: dict[str, str] = {}
        for fact in [*planted, *needed]:
            quote = fact.statement if normalize(fact.statement) in known else fact.mention
            persons.setdefault(fact.person, quote)
        for person, quote in persons.items():
            facts = dict(people.get(person, {}))
            facts.update({f.kind: f.needle for f in planted if f.person == person and f.kind == "eyes"})
            data["upsert_character_state"].append(
                {
                    "name": person,
                    "location": f"the harbour, part {chapter}",
                    "goal": "see the bell answered",
                    "relationships": "known to the keeper",
                    "knowledge": f"what happened in part {chapter}",
                    "possessions": "an oilskin coat",
                    "condition": "wary",
                    "facts": [{"key": k, "value": v} for k, v in facts.items()],
                    "evidence": quote,
                }
            )
        open_keys = open_requirements(request)
        vows = {f.key for f in self.facts}
        generic = [k for k in open_keys if k not in vows]
        fulfilled = [f.key for f in self.facts if f.kind == "promise" and f.needed and f.needed[-1] == chapter]
        data["resolve_future_requirement"] = (generic[:1] if len(generic) >= 4 else []) + [
            k for k in fulfilled if k in open_keys
        ]
        return without_evidence(json.dumps(data), request)
