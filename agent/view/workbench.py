"""The writer's pages of the view: the outline against what was written, the cast (where each
value of a character was set and the passage that shows it), the run's search, and what a run
being written is doing now. Computed from an open store, read-only, like :mod:`agent.view.pages`."""

from __future__ import annotations

import html
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup

from agent.store import RunStore
from agent.store.export.titles import Headings
from agent.store.search import (  # the sentences the search indexes, as it splits them
    DEFAULT_K,
    highlights,
    sentence_spans,
)
from agent.store.snapshots import WorldTable

STATUS_WORDS = {"running": "writing", "completed": "completed", "failed": "failed", "review": "review"}
"""The badge of a run, in words (anything else, ``stopped`` or ``interrupted``, reads ``stopped``; ``review``:
waiting for the writer, ``agent.store.writer.review``)."""
TOOL_WORDS = {
    "read": "reading back",
    "search": "searching",
    "write": "writing",
    "correct": "correcting",
    "update": "updating the story state",
    "finish": "finishing the chapter",
    "budget": "fitting the context",
}
RATE_CALLS = 20
"""Tokens/s is measured over the latest this many model calls."""
MAX_K = 1000


def status_word(status: str) -> str:
    return STATUS_WORDS.get(status, "stopped")


def find_href(run: str, text: str, unit: int | None) -> str:
    """The story page with ``text`` marked (``id=found``) and scrolled to."""
    query = {"find": " ".join(text.split())}
    if unit is not None:
        query["at"] = str(unit)
    return f"/run/{_quote(run)}/story?{urlencode(query)}#found"


def _quote(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="/")  # a batch's story is BATCH/STORY


def _states(store: RunStore) -> list[tuple[int, Any]]:
    return [(int(unit), json.loads(raw)) for unit, raw in store.query("SELECT unit, state FROM states ORDER BY unit")]


def _canon(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _target_words(store: RunStore) -> int | None:
    config = store.info().config
    story = config.get("story")
    for value in (
        config.get("words"),
        story.get("target_words") if isinstance(story, dict) else None,
        store.plans.get("words"),
    ):
        if isinstance(value, int) and value > 0:
            return value
    return None


# ---------------------------------------------------------------- outline


def outline(store: RunStore) -> dict[str, Any]:
    """The premise or prompt, and each planned chapter's target against its words and gate."""
    info = store.info()
    config = info.config
    story = config.get("story") if isinstance(config.get("story"), dict) else None
    premise: list[tuple[str, str]] = []
    if isinstance(config.get("prompt"), str) and config["prompt"]:
        premise.append(("Prompt", config["prompt"]))
    if story:
        for key in ("premise", "goal", "genre", "pov", "tense", "style", "ending"):
            if isinstance(story.get(key), str) and story[key]:
                premise.append((key.capitalize(), story[key]))
        if story.get("target_words"):
            premise.append(("Target", f"{story['target_words']} words"))
    low, high = config.get("gate_low"), config.get("gate_high")
    chapters = {c.index: c for c in store.chapters()}
    rows = []
    planned = store.plans.get("outline")
    for n, item in enumerate(planned if isinstance(planned, list) else [], start=1):
        if not isinstance(item, dict):
            continue
        index = found if isinstance(found := item.get("id"), int) else n
        target = item.get("target_words") if isinstance(item.get("target_words"), int) else None
        written = chapters.get(index)
        if written is None:
            gate = "not written"
        elif written.degraded:
            gate = "degraded: " + (written.degraded_reason or "no reason given")
        elif target and isinstance(low, int | float) and isinstance(high, int | float):
            gate = "within the gate" if low * target <= written.words <= high * target else "outside the gate"
        else:
            gate = "written"
        rows.append(
            {
                "index": index,
                "title": " ".join(str(item.get("title") or "").split()),
                "summary": str(item.get("description") or item.get("summary") or ""),
                "target": target,
                "words": written.words if written else None,
                "written_title": written.title if written else None,
                "gate": gate,
                "ok": written is not None and not written.degraded and gate != "outside the gate",
            }
        )
    if not isinstance(planned, list) and chapters:  # an imported book: its chapters as it has them
        headings = Headings.of(store)
        rows = [
            {
                "index": c.index,
                "title": headings.heading(c.index, c.title),
                "summary": "",
                "target": None,
                "words": c.words,
                "written_title": None,
                "gate": "as imported",
                "ok": True,
            }
            for c in chapters.values()
        ]
    beats = story.get("beats") if story and isinstance(story.get("beats"), list) else []
    numeric = isinstance(low, int | float) and isinstance(high, int | float)
    gate_range = f"{low:g}-{high:g} × target" if numeric else None
    return {
        "premise": premise,
        "outline_rows": rows,
        "beats": [str(b) for b in beats],
        "gate_range": gate_range,
        "target_words": _target_words(store),
    }


# ---------------------------------------------------------------- cast


@dataclass
class Value:
    """One field of a character now: its value, the unit that set it, and the passage that shows it."""

    field: str
    value: Any
    unit: int | None = None
    quote: str | None = None
    secret: bool = False
    by: str | None = None


@dataclass
class Person:
    name: str
    values: list[Value] = field(default_factory=list)
    persona: list[tuple[str, str]] = field(default_factory=list)
    relations: list[tuple[str, str]] = field(default_factory=list)
    goals: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)

    def evidence(self) -> list[tuple[int, str]]:
        """The distinct passages that show this character's values now, in story order."""
        return sorted({(v.unit, v.quote) for v in self.values if v.quote and v.unit is not None})


@dataclass
class Event:
    """A change in a character's history: the unit, the fields that changed, the evidence."""

    unit: int
    changes: list[tuple[str, Any, Any]]
    quote: str | None = None


def _nst_characters(state: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    narrative = state.get("narrative") if isinstance(state, dict) else None
    if not isinstance(narrative, dict):
        return {}, {}
    chars = narrative.get("characters")
    prov = (
        (narrative.get("provenance") or {}).get("characters") if isinstance(narrative.get("provenance"), dict) else None
    )
    return (chars if isinstance(chars, dict) else {}), (prov if isinstance(prov, dict) else {})


def _magnet_variables(state: Any) -> dict[str, dict[str, Any]]:
    """``subject -> attribute -> stored record`` (either stored format; un-owned ones under ``world``)."""
    table = WorldTable.of(state)
    out: dict[str, dict[str, Any]] = {}
    for key, record in table.items().items() if table is not None else []:
        subject, _, attribute = key.rpartition(".")
        out.setdefault(subject or "world", {})[attribute] = record
    return out


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "; ".join(value)
    return _canon(value)


def cast(store: RunStore) -> dict[str, Any]:
    """The cast page's data: ``snapshots`` (a chapter run's character snapshots and facts) or
    ``personas`` (a step run's personas, variables, relations and goals)."""
    states = _states(store)
    if store.info().unit_kind == "step":
        return {
            "cast_kind": "personas",
            "people": _magnet_cast(store, states),
            "story_goals": _story_goals(states),
            "facts": [],
        }
    return {"cast_kind": "snapshots", "people": _nst_cast(states), "story_goals": [], "facts": _nst_facts(states)}


def _nst_cast(states: list[tuple[int, Any]]) -> list[Person]:
    if not states:
        return []
    now, _ = _nst_characters(states[-1][1])
    history = [(unit, *_nst_characters(state)) for unit, state in states]
    people = []
    for name, snapshot in now.items():
        person = Person(name)
        record = snapshot if isinstance(snapshot, dict) else {"state": snapshot}
        for key, value in record.items():
            if key in ("name", "evidence"):
                continue
            if key == "facts":
                person.facts = [_text(f) for f in value] if isinstance(value, list) else [_text(value)]
                continue
            unit, quote = _set_at(history, name, key, value)
            person.values.append(Value(key, value, unit, quote))
        people.append(person)
    return people


def _set_at(history: list[tuple[int, dict, dict]], name: str, key: str, value: Any) -> tuple[int | None, str | None]:
    """The earliest unit from which ``name``'s ``key`` has held ``value`` ever since, and the evidence there."""
    target = _canon(value)
    found: tuple[int | None, str | None] = (None, None)
    for unit, chars, prov in reversed(history):
        snap = chars.get(name)
        if not isinstance(snap, dict) or _canon(snap.get(key)) != target:
            break
        p = prov.get(name)
        quote = p.get("quote") if isinstance(p, dict) and p.get("chapter") == unit else None
        found = (unit, quote)
    return found


def _nst_facts(states: list[tuple[int, Any]]) -> list[dict[str, Any]]:
    if not states:
        return []
    narrative = states[-1][1].get("narrative") if isinstance(states[-1][1], dict) else None
    if not isinstance(narrative, dict):
        return []
    provenance = found if isinstance(found := narrative.get("provenance"), dict) else {}
    out = []
    for collection, label in (("past_events", "event"), ("future_requirements", "open requirement")):
        items = narrative.get(collection)
        prov = found if isinstance(found := provenance.get(collection), dict) else {}
        for key, value in items.items() if isinstance(items, dict) else []:
            p = found if isinstance(found := prov.get(key), dict) else {}
            out.append(
                {"kind": label, "key": key, "text": _text(value), "unit": p.get("chapter"), "quote": p.get("quote")}
            )
    return out


def _magnet_cast(store: RunStore, states: list[tuple[int, Any]]) -> list[Person]:
    story = store.info().config.get("story")
    defined = found if isinstance(story, dict) and isinstance(found := story.get("characters"), list) else []
    variables = _magnet_variables(states[-1][1]) if states else {}
    names = [str(c.get("name")) for c in defined if isinstance(c, dict) and c.get("name")]
    names += [n for n in variables if n not in names and n != "world"]
    people = []
    for name in names:
        person = Person(name)
        spec = next((c for c in defined if isinstance(c, dict) and c.get("name") == name), {})
        for key in ("role", "description", "personality", "abilities", "location"):
            if spec.get(key):
                person.persona.append((key, _text(spec[key])))
        for key, secret in (spec.get("secrets") or {}).items():
            person.persona.append((f"secret: {key}", _text(secret)))
        person.relations = [(str(k), _text(v)) for k, v in (spec.get("relationships") or {}).items()]
        person.goals = [_text(g) for g in spec.get("goals") or []]
        for key, entry in (variables.get(name) or {}).items():
            if not isinstance(entry, dict):
                continue
            person.values.append(
                Value(key, entry.get("value"), entry.get("step"), None, bool(entry.get("secret")), entry.get("by"))
            )
            other = key.removeprefix("relationship_with_")
            if other != key and all(
                w.lower().replace(" ", "_") != other or h != _text(entry.get("value")) for w, h in person.relations
            ):
                person.relations.append((f"{other} (now)", _text(entry.get("value"))))
        people.append(person)
    return people


def _story_goals(states: list[tuple[int, Any]]) -> list[dict[str, Any]]:
    goals = states[-1][1].get("goals") if states and isinstance(states[-1][1], dict) else None
    return [g for g in goals or [] if isinstance(g, dict)]


def character(store: RunStore, who: str | None = None) -> dict[str, Any]:
    """One character now (as on the cast page) and its history: every unit where something of it changed."""
    listed = cast(store)
    person = next((p for p in listed["people"] if p.name == who), None)
    events: list[Event] = []
    if person is not None:
        name = person.name  # who, now known to be a name
        previous: dict[str, Any] = {}
        for unit, state in _states(store):
            if listed["cast_kind"] == "snapshots":
                chars, prov = _nst_characters(state)
                now = chars.get(name)
                now = {k: v for k, v in now.items() if k != "name"} if isinstance(now, dict) else {}
                p = prov.get(name)
                quote = p.get("quote") if isinstance(p, dict) and p.get("chapter") == unit else None
            else:
                now = {
                    k: e.get("value") if isinstance(e, dict) else e
                    for k, e in (_magnet_variables(state).get(name) or {}).items()
                }
                quote = None
            changes = [
                (k, previous.get(k), now.get(k))
                for k in sorted(previous.keys() | now.keys())
                if _canon(previous.get(k)) != _canon(now.get(k))
            ]
            if changes:
                events.append(Event(unit, changes, quote))
            previous = now
    return {**listed, "person": person, "history": events, "who": who}


# ---------------------------------------------------------------- search


def search(store: RunStore, query: str = "", k: int = DEFAULT_K) -> dict[str, Any]:
    """The run's BM25 search (what ``fabula search`` runs), hits linked to their passage."""
    searchable = store.info().unit_kind == "chapter"
    k = max(1, min(k, MAX_K))
    hits = store.reader_search(query, k=k) if searchable and query.strip() else []
    texts: dict[int, str] = {}
    centres = []
    for hit in hits:  # the window's centre sentence: the passage a hit links to
        if hit.chapter not in texts:
            chapter = store.chapter(hit.chapter)
            texts[hit.chapter] = chapter.text if chapter else ""
        spans = sentence_spans(texts[hit.chapter])
        a, b = spans[hit.position] if hit.position < len(spans) else (0, 0)
        centres.append(texts[hit.chapter][a:b] or hit.text)
    shown = [marked_words(" ".join(hit.text.split()), query) for hit in hits]
    return {"query": query, "k": k, "hits": list(zip(hits, centres, shown, strict=True)), "searchable": searchable}


def marked_words(text: str, query: str) -> Markup:
    """``text`` escaped, the query's words and phrases in ``<mark class="term">``."""
    out, pos = [], 0
    for start, end in highlights(text, query):
        out += [html.escape(text[pos:start]), f'<mark class="term">{html.escape(text[start:end])}</mark>']
        pos = end
    return Markup("".join(out) + html.escape(text[pos:]))


# ---------------------------------------------------------------- live status


def activity(store: RunStore) -> dict[str, Any]:
    """What a run is doing: for a running run the current unit, what the model or a tool is doing,
    the draft number, words so far, tokens/s and an ETA; for every run its status in words."""
    status = store.live_status()
    out: dict[str, Any] = {"status": status, "word": status_word(status), "running": status == "running"}
    info = store.info()
    if status != "running":
        if status != "completed":  # why it stopped, and the one command that goes on
            reason = (info.error or "").strip().splitlines()
            out.update(
                reason=reason[0]
                if reason
                else (
                    "it was interrupted (the process that wrote it is gone)"
                    if status == "interrupted"
                    else "no reason was recorded"
                ),
                next=f"fabula resume {store.run_dir}",
            )
        return out
    call = store.query("SELECT unit, role, created_at FROM llm_calls ORDER BY id DESC LIMIT 1")
    tool = store.query("SELECT unit, tool, ok, created_at FROM tool_calls ORDER BY id DESC LIMIT 1")
    unit = info.last_unit + 1
    doing = "starting"
    if call:
        role = call[0]["role"] or ""
        doing = _role_words().get(role, "the model is writing" if not role else role.replace("_", " "))
    if tool and (not call or tool[0]["created_at"] >= call[0]["created_at"]) and tool[0]["unit"] == unit:
        doing = TOOL_WORDS.get(tool[0]["tool"], tool[0]["tool"])
    drafts = store.query("SELECT count(*) FROM tool_calls WHERE unit = ? AND tool = 'write'", (unit,))[0][0]
    recent = store.query(
        "SELECT coalesce(sum(completion_tokens), 0), coalesce(sum(latency_s), 0) FROM "
        f"(SELECT completion_tokens, latency_s FROM llm_calls ORDER BY id DESC LIMIT {RATE_CALLS})"
    )[0]
    rate = recent[0] / recent[1] if recent[1] else None
    words = int(store.words_written())
    target = _target_words(store)
    started = store.query("SELECT min(started_at) FROM sessions")[0][0]
    elapsed = time.time() - started if started else None
    eta = None
    if target and words and elapsed and words < target:
        eta = (target - words) * elapsed / words
    out.update(
        unit=unit,
        units=info.target_units,
        unit_word="chapter" if info.unit_kind == "chapter" else "step",
        doing=doing,
        draft=drafts or None,
        words=words,
        target=target,
        rate=rate,
        eta=_duration(eta),
    )
    return out


def _role_words() -> dict[str, str]:
    """What a model call of each role is doing, in each pipeline's own words ("choosing the next step")."""
    from agent import pipelines

    words: dict[str, str] = {}
    for name in pipelines.names():
        words.update(pipelines.get(name).progress)
    return words


def _duration(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"
