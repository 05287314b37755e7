"""What each page shows, computed from an open store: shared by the web view and the
self-contained HTML export, so both show the same story, timeline, ledger and judgments."""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from typing import Any

from markupsafe import Markup

from agent import pipelines
from agent.language import run_language_code
from agent.store import RunStore, StoreError
from agent.store.export.book import Book, read_book
from agent.store.export.markdown import story_title
from agent.store.judgments import Judgment
from agent.store.reports.costs import calls, per_unit
from agent.store.reports.stats import summarize
from agent.store.reports.timeline import timeline
from agent.style.report import style_lines
from agent.view import versions_page, workbench
from agent.view.failure_words import failure
from agent.view.passages import JudgmentView, judgment_views, locate, marks
from agent.view.svg import bar_chart

PAGES = ("story", "outline", "cast", "character", "search", "versions", "state", "costs", "judgments")
NAV = (
    ("story", "Book"),
    ("outline", "Outline"),
    ("cast", "Cast"),
    ("search", "Search"),
    ("versions", "Versions"),
    ("state", "State"),
    ("costs", "Ledger"),
    ("judgments", "Judgments"),
)
"""The run's pages in the header, in order (the character page is reached from the cast)."""


def version(store: RunStore) -> str:
    """Changes whenever something a page shows changes (a unit, a call, a judgment, the status)."""
    info = store.info()
    calls_n, calls_max = store.query("SELECT count(*), coalesce(max(id), 0) FROM llm_calls")[0]
    judged = store.query("SELECT count(*), coalesce(max(updated_at), 0) FROM judgments")[0]
    paragraphs = store.query("SELECT count(*) FROM paragraphs")[0][0]
    revised = store.query("SELECT coalesce(sum(version), 0) FROM chapters")[0][0]
    return (
        f"{info.last_unit}.{paragraphs}.{revised}.{calls_n}.{calls_max}.{judged[0]}.{judged[1]}.{store.live_status()}"
    )


def story_name(store: RunStore) -> str:
    """What a batch's story is called in the runs list: its title, else its prompt's first words (never "3")."""
    title = story_title(store)
    if title != store.run_dir.name:
        return title
    prompt = store.info().config.get("prompt")
    if isinstance(prompt, str) and prompt.strip():
        words = prompt.split()
        return " ".join(words[:8]) + (" ..." if len(words) > 8 else "")
    return title


def book_of(store: RunStore) -> Book:
    return read_book(store, by_step=store.info().unit_kind == "step")


def all_judgments(store: RunStore) -> list[Judgment]:
    rows = store.query(
        "SELECT kind, item, judge, protocol, status, reply, error, meta, prompt_tokens, "
        "completion_tokens, latency_s, attempts, updated_at FROM judgments "
        "ORDER BY kind, judge, item, protocol"
    )
    return [Judgment.from_row(r) for r in rows]


def marked(text: str, spans: list[tuple[int, int, str, str]]) -> Markup:
    """``text`` escaped, each quoted span wrapped in ``<mark id=anchor>`` (overlaps: first wins, except
    that the passage a link was followed to, ``found``, always wins)."""
    out, pos = [], 0
    found = [s for s in spans if s[2] == "found"][:1]
    if found:
        start, end = found[0][:2]
        spans = found + [s for s in spans if s[2] != "found" and (s[1] <= start or s[0] >= end)]
    for start, end, anchor, label in sorted(spans):
        if start < pos:  # inside a passage already marked: its links land on that one
            out.append(f'<span id="{anchor}" class="quote-alias"></span>')
            continue
        out.append(html.escape(text[pos:start]))
        out.append(
            f'<mark id="{anchor}" class="quote" title="{html.escape(label)}">{html.escape(text[start:end])}</mark>'
        )
        pos = end
    out.append(html.escape(text[pos:]))
    return Markup("".join(out).replace("\n", "<br>\n"))


def overview(store: RunStore) -> dict[str, Any]:
    summary = summarize(store)
    info = store.info()
    return {
        "summary": summary,
        "info": info,
        "title": story_title(store),
        "activity": workbench.activity(store),
        "lang": run_language_code(info.config),
        "style": style_lines(store.plans.get("style"), store.chapters()),
        "style_card": _card(store.plans.get("style")),
        "run_path": str(store.run_dir),
    }


def _card(guide: Any) -> list[str]:
    """The style card's lines (measured, then the model's description), for the summary."""
    if not isinstance(guide, dict):
        return []
    return [*str(guide.get("card", "")).splitlines(), *([guide["description"]] if guide.get("description") else [])]


def story(store: RunStore, find: str | None = None, at: int | None = None) -> dict[str, Any]:
    """The book; with ``find``, that passage (looked up in unit ``at`` first) marked ``id=found``."""
    book = book_of(store)
    views = judgment_views(all_judgments(store), book.sections)
    where = marks(views)
    found = locate(find, book.sections, at) if find else None
    if found is not None:
        where.setdefault((found.section, found.paragraph), []).insert(
            0, (found.start, found.end, "found", "the passage you followed")
        )
    rendered = [
        {"section": s, "paragraphs": [marked(p, where.get((s.index, n), [])) for n, p in enumerate(s.paragraphs)]}
        for s in book.sections
    ]
    stale = store.plans.get("stale_after")
    forked = store.plans.get("forked_from")
    stale = stale if isinstance(stale, dict) else None
    return {
        "book": book,
        "sections": rendered,
        "stale": stale,
        "after_edit": (
            pipelines.after_edit(store, stale["unit"]) if stale and isinstance(stale.get("unit"), int) else None
        ),
        "forked": forked if isinstance(forked, dict) else None,
        "find": find,
        "found": found is not None,
    }


def state(store: RunStore, unit: int | None = None) -> dict[str, Any]:
    units = timeline(store)
    info = store.info()
    graph, graph_error = None, None
    described = pipelines.known(info.pipeline)
    if described is not None and described.graph is not None:
        try:
            graph = Markup(described.graph(store, unit))
        except StoreError as exc:
            graph_error = str(exc)
    return {
        "units": units,
        "graph": graph,
        "graph_error": graph_error,
        "graph_unit": unit or info.last_unit,
        "unit_word": "Chapter" if info.unit_kind == "chapter" else "Step",
        "dumps": _dumps,
        "failure": failure,
        "run_path": str(store.run_dir),
    }


def _dumps(value: Any) -> str:
    """A state value for reading: strings as they are, records as ``field: value; ...``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and all(isinstance(v, str | int | float | bool) for v in value.values()):
        return "; ".join(f"{k}: {v}" for k, v in value.items())
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def costs(store: RunStore) -> dict[str, Any]:
    units = per_unit(store)
    labels = [str(u.unit) if u.unit else "plan" for u in units]
    tokens = bar_chart(
        "Tokens per unit",
        labels,
        [
            ("cached prompt", [u.cached_prompt_tokens for u in units], "#7fb3d5"),
            ("uncached prompt", [u.prompt_tokens - u.cached_prompt_tokens for u in units], "#1f618d"),
            ("completion", [u.completion_tokens for u in units], "#e67e22"),
        ],
    )
    latency = bar_chart(
        "Model time per unit", labels, [("latency", [u.latency_s for u in units], "#566573")], unit=" s"
    )
    tool_names = sorted({t for u in units for t in u.tools})
    palette = ["#27ae60", "#8e44ad", "#c0392b", "#2980b9", "#d4ac0d", "#7f8c8d", "#16a085", "#d35400"]
    tools = bar_chart(
        "Tool calls per unit",
        labels,
        [(t, [u.tools.get(t, 0) for u in units], palette[i % len(palette)]) for i, t in enumerate(tool_names)],
    )
    return {
        "unit_costs": units,
        "calls": calls(store),
        "charts": [Markup(tokens), Markup(latency), Markup(tools)],
        "tool_names": tool_names,
    }


def judgments(store: RunStore) -> dict[str, Any]:
    views: list[JudgmentView] = judgment_views(all_judgments(store), book_of(store).sections)
    return {"views": views}


def page(store: RunStore, name: str, **options: Any) -> dict[str, Any]:
    builders: dict[str, Callable[..., dict[str, Any]]] = {
        "story": story,
        "state": state,
        "costs": costs,
        "judgments": judgments,
        "outline": workbench.outline,
        "cast": workbench.cast,
        "character": workbench.character,
        "search": workbench.search,
        "versions": versions_page.versions,
    }
    return {"dumps": _dumps, **overview(store), **builders[name](store, **options)}
