"""``fabula export --format html``: the book for a reader (title page, contents, chapters) in one
self-contained file (the stylesheet inlined, no script, nothing fetched), rendered from the web view's
own templates; ``with_ledger`` appends the run's state timeline, call ledger and judgments."""

from __future__ import annotations

from agent.store import RunStore
from agent.store.export.markdown import author_line, series_of
from agent.view import pages
from agent.view.templates_env import STATIC, render


def export_html(store: RunStore, *, with_ledger: bool = False) -> str:
    context = {**pages.overview(store), **pages.story(store)}
    if with_ledger:
        context |= {**pages.state(store), **pages.costs(store), **pages.judgments(store)}
    unit = "Chapter" if store.info().unit_kind == "chapter" else "Step"
    return render(
        "export.html",
        css=(STATIC / "style.css").read_text(encoding="utf-8"),
        static_export=True,
        passage_href=lambda q: f"#{q.anchor}",
        unit_label=unit,
        page="export",
        with_ledger=with_ledger,
        author=author_line(store),
        series=series_of(store),
        **context,
    )
