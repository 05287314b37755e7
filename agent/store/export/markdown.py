"""Export a run's story as Markdown, plain text or JSON.

Chapter and paragraph texts are written verbatim (no reflow, no stripping, no newline
translation), so the story read back from an export is byte-identical to what was stored.
JSON carries everything needed to rebuild the story and check it: the run, the plan, every
chapter with its metadata, Magnet paragraphs, and the final state.

Markdown opens with YAML front matter and uses ``#`` per chapter (what pandoc turns into a
book); EPUB and the self-contained HTML live in ``export_epub`` and ``agent.view.html_export``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from agent.store.export.titles import IMPORTED_KIND, Headings
from agent.store.records import Chapter
from agent.store.runstore import RunStore
from agent.store.snapshots import StepRecord

FORMATS = ("md", "txt", "json")
JSON_FORMAT_VERSION = 1


def story_title(store: RunStore) -> str:
    """The plan's title (the planner's, an outline edit's or ``export --title``) if it has one, else
    the run directory's name."""
    for key in ("title", "premise_title"):
        value = store.plans.get(key)
        if isinstance(value, str) and value.strip():
            return _one_line(value)
    return store.run_dir.name


def author_line(store: RunStore) -> str:
    """Who wrote it: the author recorded by ``export --author`` (or found by ``fabula import``), else a
    configured one, else fabula with the run's model; an imported book with no author found is
    "Anonymous", never credited to fabula."""
    info = store.info()
    for configured in (store.plans.get("author"), info.config.get("author")):
        if isinstance(configured, str) and configured.strip():
            return " ".join(configured.split())
    if info.pipeline == IMPORTED_KIND:
        return "Anonymous"
    return f"fabula ({info.model})" if info.model else "fabula"


def export(store: RunStore, fmt: str) -> str:
    if fmt == "md":
        return _markdown(store)
    if fmt == "txt":
        return _text(store)
    if fmt == "json":
        return json.dumps(to_json(store), ensure_ascii=False, indent=2) + "\n"
    raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")


def _sections(store: RunStore) -> list[tuple[str | None, str]]:
    """``(heading, body)`` per chapter; a Magnet story is one body of paragraphs, or one per
    chapter when its steps record chapters."""
    chapters = store.chapters()
    if chapters:
        headings = Headings.of(store)
        return [(headings.heading(c.index, c.title) + degraded_marker(c), c.text) for c in chapters]
    paragraphs = store.paragraphs()
    if not paragraphs:
        return []
    chapter_of = {s["step"]: StepRecord.read(s["record"]).chapter for s in store.steps()}
    if len({chapter_of.get(p.step) for p in paragraphs} - {None}) < 2:
        return [(None, "\n\n".join(p.text for p in paragraphs))]
    # a Magnet story written with chapters (its step records say which): one heading per chapter
    out: list[tuple[str | None, list[str]]] = []
    for p in paragraphs:
        heading = f"Chapter {chapter_of.get(p.step) or 1}"
        if not out or out[-1][0] != heading:
            out.append((heading, []))
        out[-1][1].append(p.text)
    return [(heading, "\n\n".join(texts)) for heading, texts in out]


def _markdown(store: RunStore) -> str:
    """YAML front matter (title, author, ...) then one ``#`` heading per chapter, so that
    ``pandoc story.md -o story.epub`` makes a book with a title page and one chapter each."""
    parts = [front_matter(store)]
    for heading, body in _sections(store):
        parts.append(f"# {heading}\n\n{body}" if heading else body)
    return "\n\n".join(parts) + "\n"


def front_matter(store: RunStore) -> str:
    """A YAML block; every value is a JSON string or number, which YAML reads as written."""
    info = store.info()
    fields: dict[str, Any] = {
        "title": story_title(store),
        "author": author_line(store),
        "date": time.strftime("%Y-%m-%d", time.gmtime(info.created_at)),
        "generator": "fabula",
        "pipeline": info.pipeline,
    }
    if info.model:
        fields["model"] = info.model
    named = series_of(store)
    if named is not None:
        fields["series"], fields["series_index"] = named
    lines = [f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in fields.items()]
    return "---\n" + "\n".join(lines) + "\n---"


def series_of(store: RunStore) -> tuple[str, int] | None:
    """The series a sequel belongs to (``fabula sequel``) and its number in it; None for a book on its own."""
    record = store.plans.get("series")
    if isinstance(record, dict) and isinstance(record.get("name"), str) and isinstance(record.get("index"), int):
        return record["name"], record["index"]
    return None


def _text(store: RunStore) -> str:
    title = story_title(store)
    parts = [f"{title}\n{'=' * len(title)}"]
    named = series_of(store)
    if named is not None:
        parts[0] += f"\nBook {named[1]} of {named[0]}"
    for heading, body in _sections(store):
        parts.append(f"{heading}\n\n{body}" if heading else body)
    return "\n\n\n".join(parts) + "\n"


def to_json(store: RunStore) -> dict[str, Any]:
    info = store.info()
    return {
        "format": "fabula-run-export",
        "format_version": JSON_FORMAT_VERSION,
        "title": story_title(store),
        "series": dict(zip(("name", "index"), series_of(store) or (), strict=False)) or None,
        "run": {
            "pipeline": info.pipeline,
            "unit_kind": info.unit_kind,
            "status": info.status,
            "model": info.model,
            "backend": info.backend,
            "config": info.config,
            "fingerprint": info.fingerprint,
            "units_done": info.last_unit,
            "target_units": info.target_units,
            "created_at": info.created_at,
            "finished_at": info.finished_at,
            "schema_version": store.schema_version(),
        },
        "plan": store.plans.all(),
        "chapters": [c.as_dict() for c in store.chapters()],
        "paragraphs": [p.as_dict() for p in store.paragraphs()],
        "final_state": store.state(),
    }


def degraded_marker(chapter: Chapter) -> str:
    """A visible flag on the heading of a chapter kept without passing its checks (the body stays verbatim)."""
    if not chapter.degraded:
        return ""
    return f" [DEGRADED: {_one_line(chapter.degraded_reason or 'no reason given')}]"


def _one_line(text: str) -> str:
    return " ".join(text.split())
