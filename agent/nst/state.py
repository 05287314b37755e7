"""The narrative state ``s_t = (C, P, F)`` and its transition ``U`` (paper Eq. 6), with provenance.

Characters are whole snapshots keyed by name (matched case-insensitively) that carry a keyed
``facts`` map of identity facts (age, birth date, appearance, title, aliases: where the paper's
consistency gains concentrate, Appendices C and E); past events are keyed records that never
change once written; future requirements are keyed obligations that are added and resolved.

An update applies **per entry**: every new or changed entry must quote the accepted
chapter (``agent.quotes``, whitespace- and quote-style-tolerant) and records its chapter and
quote in ``provenance``; an entry that breaks a rule is refused with a reason naming it, and
the rest applies. Resolving a key that is not open is a no-op, and so is re-adding an event or
requirement under its key with the same text, whitespace and letter case aside (as in the reference
code, which matches keyed entries by key alone: nothing merges entries whose keys differ).

The prompt layout serves the prefix cache: past events (append-only) come first, with the
digests of consolidated arcs (``agent.nst.consolidate``) before the recent events, then what
changes from chapter to chapter (characters, open requirements). Design: docs/design/narrative-state.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from agent.quotes import normalize, occurs
from grammars.nst import UpdateCall

KEY = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
SNAPSHOT_FIELDS = ("location", "goal", "relationships", "knowledge", "possessions", "condition")
COLLECTIONS = ("characters", "past_events", "future_requirements")


class UpdateError(ValueError):
    """An update of which nothing could be applied; its message lists every problem found."""


@dataclass(frozen=True)
class Applied:
    """What one update did: the new state, and each refused entry with its reason."""

    state: NarrativeState
    refused: list[str]
    applied: int
    notes: list[str] = field(default_factory=list)


@dataclass
class NarrativeState:
    characters: dict[str, dict[str, Any]] = field(default_factory=dict)
    past_events: dict[str, str] = field(default_factory=dict)
    future_requirements: dict[str, str] = field(default_factory=dict)
    provenance: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """collection -> key (or character name) -> {"chapter": n, "quote": "..."} of its last change."""
    digests: list[dict[str, Any]] = field(default_factory=list)
    """Consolidated arcs, oldest first: {"arc", "chapters": [first, last], "events": [keys], "text"}."""
    canon: dict[str, dict[str, str]] = field(default_factory=dict)
    """Character name -> facts from the writer's story bible (``agent.bible``): no update may change them."""

    # -- persistence -------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "characters": self.characters,
            "past_events": self.past_events,
            "future_requirements": self.future_requirements,
        }
        if self.provenance:
            data["provenance"] = self.provenance
        if self.digests:
            data["digests"] = self.digests
        if self.canon:
            data["canon"] = self.canon
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> NarrativeState:
        data = data or {}
        return cls(
            dict(data.get("characters", {})),
            dict(data.get("past_events", {})),
            dict(data.get("future_requirements", {})),
            {k: dict(v) for k, v in (data.get("provenance") or {}).items()},
            list(data.get("digests") or []),
            {k: dict(v) for k, v in (data.get("canon") or {}).items()},
        )

    def counts(self) -> dict[str, int]:
        return {
            "characters": len(self.characters),
            "past_events": len(self.past_events),
            "open_requirements": len(self.future_requirements),
        }

    def event_chapter(self, key: str) -> int:
        """The chapter an event was recorded in (0: unknown, e.g. a run older than provenance)."""
        return int((self.provenance.get("past_events", {}).get(key) or {}).get("chapter") or 0)

    def digested(self) -> set[str]:
        return {key for digest in self.digests for key in digest.get("events", [])}

    # -- the transition ------------------------------------------------------------------
    def apply(self, update: UpdateCall, *, chapter: int = 0, text: str | None = None) -> Applied:
        """``U(s, Δ)`` per entry. With ``text`` (the accepted chapter), every new or changed entry
        must quote it. Raises :class:`UpdateError` only when the update changed nothing and
        refused something (so the model sees it failed)."""
        t = _Transition(
            normalize(text) if text is not None else None,
            chapter,
            {c: dict(self.provenance.get(c, {})) for c in COLLECTIONS},
            canon={k.casefold(): v for k, v in self.canon.items()},
        )
        characters = t.upsert_characters(dict(self.characters), update.upsert_character_state)
        events = t.add_keyed(
            dict(self.past_events),
            update.add_past_event,
            "past_events",
            "add_past_event",
            "the key already exists with a different text; past events never change, choose a new key",
        )
        requirements = t.add_keyed(
            dict(self.future_requirements),
            update.add_future_requirement,
            "future_requirements",
            "add_future_requirement",
            "the key is already open with a different text",
        )
        t.resolve(requirements, update.resolve_future_requirement)
        if t.refused and not t.applied:
            raise UpdateError("; ".join(t.refused))
        state = NarrativeState(
            characters,
            events,
            requirements,
            {c: v for c, v in t.provenance.items() if v},
            list(self.digests),
            dict(self.canon),
        )
        return Applied(state, t.refused, t.applied, t.notes)

    # -- the prompt ------------------------------------------------------------------------
    def render(self, style: str = "fabula") -> str:
        """The state as it appears in the chapter prompt: append-only part first; ``style`` "reference":
        :meth:`render_json`."""
        if style == "reference":
            return self.render_json()
        lines = ["Past events (in the order they happened; key: description):"]
        digested = self.digested()
        for digest in self.digests:
            first, last = digest.get("chapters", [0, 0])
            lines.append(
                f"[digest of chapters {first}-{last}; its {len(digest.get('events', []))} events stay "
                f"searchable] {digest.get('text', '')}"
            )
        verbatim = [json.dumps({k: v}, ensure_ascii=False) for k, v in self.past_events.items() if k not in digested]
        lines += verbatim or ([] if self.digests else ["(none yet)"])
        lines.append("")
        lines.append("Characters (current snapshot of each):")
        snapshots = [json.dumps({"name": n, **s}, ensure_ascii=False) for n, s in self.characters.items()]
        lines += snapshots or ["(none yet)"]
        lines.append("")
        lines.append("Open future requirements (key: obligation):")
        lines += [json.dumps({k: v}, ensure_ascii=False) for k, v in self.future_requirements.items()] or ["(none)"]
        return "\n".join(lines)

    def render_json(self) -> str:
        """The state as the reference shows it: one indented JSON object, characters then past events
        (with the chapter each was recorded in) then open requirements (with the chapter that opened
        them), each entry numbered; digested arcs stand before the events they replace."""
        where = {c: self.provenance.get(c, {}) for c in COLLECTIONS}
        digested = self.digested()
        events: list[dict[str, Any]] = [
            {"digest_of_chapters": d.get("chapters", [0, 0]), "description": d.get("text", "")} for d in self.digests
        ]
        events += [
            {"key": k, "description": v, "chapter_id": int((where["past_events"].get(k) or {}).get("chapter") or 0)}
            for k, v in self.past_events.items()
            if k not in digested
        ]
        data = {
            "character_states": [
                {"id": i, "name": name, **entry} for i, (name, entry) in enumerate(self.characters.items(), 1)
            ],
            "past_events": [{"id": i, **e} for i, e in enumerate(events, 1)],
            "future_requirements": [
                {
                    "id": i,
                    "key": k,
                    "description": v,
                    "introduced_chapter_id": int((where["future_requirements"].get(k) or {}).get("chapter") or 0),
                }
                for i, (k, v) in enumerate(self.future_requirements.items(), 1)
            ],
        }
        return json.dumps(data, ensure_ascii=False, indent=2)

    def find_events(self, query: str, limit: int = 5) -> list[tuple[str, str]]:
        """Past events whose key or text shares the most words with ``query`` (digested ones included)."""
        terms = {t for t in re.findall(r"\w+", query.casefold()) if len(t) > 2}
        scored = []
        for key, text in self.past_events.items():
            words = set(re.findall(r"\w+", f"{key.replace('_', ' ')} {text}".casefold()))
            score = len(terms & words)
            if score:
                scored.append((-score, key, text))
        return [(k, t) for _, k, t in sorted(scored)[:limit]]


def same_text(a: str, b: str) -> bool:
    """Two descriptions that differ only in whitespace and letter case: a keyed entry re-sent with one
    of them is already recorded (the reference compares its keyed entries so, agent_core.py:4042)."""
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _key_ok(key: str, where: str, refused: list[str]) -> bool:
    if KEY.fullmatch(key) is None:
        refused.append(f"{where}: the key must match ^[a-z][a-z0-9_]{{0,63}}$")
        return False
    return True


def describe_update(update: UpdateCall) -> str:
    return (
        f"{len(update.upsert_character_state)} character(s) upserted, {len(update.add_past_event)} event(s) "
        f"added, {len(update.add_future_requirement)} requirement(s) added, "
        f"{len(update.resolve_future_requirement)} resolved"
    )


@dataclass
class _Transition:
    """One update being applied: what it refused, noted and applied, and the provenance it writes."""

    body: str | None
    """The accepted chapter, normalized (None: evidence is not checked)."""
    chapter: int
    provenance: dict[str, dict[str, Any]]
    refused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    applied: int = 0
    canon: dict[str, dict[str, str]] = field(default_factory=dict)
    """Folded character name -> canon facts (the story bible's)."""

    def contradicts_canon(self, name: str, facts: dict[str, str]) -> bool:
        """Refuse (and say so, quoting the fact) a snapshot that changes a canon fact of ``name``."""
        for key, value in self.canon.get(name.casefold(), {}).items():
            if key in facts and facts[key].strip().casefold() != value.strip().casefold():
                self.refused.append(
                    f"upsert_character_state {name!r}: fact {key!r} = {facts[key]!r} contradicts "
                    f"the canon fact {key}: {value!r} (from the story bible); canon never changes"
                )
                return True
        return False

    def supported(self, where: str, quote: str | None) -> bool:
        if self.body is None or (quote is not None and occurs(quote, self.body)):
            return True
        self.refused.append(
            f"{where}: the evidence {_short(quote or '')!r} does not occur in chapter {self.chapter}; "
            "copy a passage of the chapter exactly"
        )
        return False

    def upsert_characters(self, characters: dict[str, dict[str, Any]], snaps: Any) -> dict[str, dict[str, Any]]:
        seen: set[str] = set()
        for snap in snaps:
            name = snap.name.strip()
            if not name:
                self.refused.append("upsert_character_state: a character has an empty name")
                continue
            folded = name.casefold()
            if folded in seen:
                self.refused.append(f"upsert_character_state {name!r}: appears twice in this update")
                continue
            seen.add(folded)
            snap_facts = getattr(snap, "facts", [])  # a {name, description} note has none
            bad_fact = next((f.key for f in snap_facts if KEY.fullmatch(f.key) is None), None)
            if bad_fact is not None:
                self.refused.append(
                    f"upsert_character_state {name!r}: fact key {bad_fact!r} must match ^[a-z][a-z0-9_]{{0,63}}$"
                )
                continue
            facts = {fact.key: fact.value for fact in snap_facts}
            if self.contradicts_canon(name, facts):
                continue
            facts = {**facts, **self.canon.get(folded, {})}  # a canon fact left out is kept, not lost
            entry: dict[str, Any] = (
                {f: getattr(snap, f) for f in SNAPSHOT_FIELDS}
                if hasattr(snap, SNAPSHOT_FIELDS[0])
                else {"description": snap.description}
            )
            if facts:
                entry["facts"] = facts
            existing = [k for k in characters if k.casefold() == folded]
            if existing and characters[existing[0]] == entry and existing[0] == name:
                continue  # unchanged: nothing to prove
            quote = getattr(snap, "evidence", None)
            if not self.supported(f"upsert_character_state {name!r}", quote):
                continue
            for old in existing:
                del characters[old]
                self.provenance["characters"].pop(old, None)
            characters[name] = entry
            self.provenance["characters"][name] = {"chapter": self.chapter, "quote": quote}
            self.applied += 1
        return characters

    def add_keyed(self, table: dict[str, str], items: Any, collection: str, what: str, exists: str) -> dict[str, str]:
        """New keyed entries (past events, requirements); a key that exists with another text (whitespace and
        letter case aside: :func:`same_text`) is refused, one with the same text changes nothing."""
        for item in items:
            where = f"{what} {item.key!r}"
            if not _key_ok(item.key, where, self.refused):
                continue
            if item.key in table:
                if not same_text(table[item.key], item.description):
                    self.refused.append(f"{where}: {exists}")
                continue  # the same key and text: already recorded, the stored text stays
            quote = getattr(item, "evidence", None)
            if not self.supported(where, quote):
                continue
            table[item.key] = item.description
            self.provenance[collection][item.key] = {"chapter": self.chapter, "quote": quote}
            self.applied += 1
        return table

    def resolve(self, requirements: dict[str, str], keys: Any) -> None:
        for key in keys:
            if key not in requirements:
                self.notes.append(f"resolve {key!r}: no open requirement has this key (ignored)")
                continue
            del requirements[key]
            self.provenance["future_requirements"].pop(key, None)
            self.applied += 1
