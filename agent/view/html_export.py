"""``fabula export --format html``: the story, state timeline, ledger and judgments in one
self-contained file (the stylesheet inlined, the graph and plots as inline SVG, no script,
nothing fetched), rendered from the web view's own templates."""

from __future__ import annotations

from agent.store import RunStore
from agent.view import pages
from agent.view.templates_env import STATIC, render


def export_html(store: RunStore) -> str:
    context = {**pages.overview(store), **pages.story(store), **pages.state(store), **pages.costs(store),
               **pages.judgments(store)}
    unit = "Chapter" if store.info().unit_kind == "chapter" else "Step"
    return render("export.html", css=(STATIC / "style.css").read_text(encoding="utf-8"), static_export=True,
                  passage_href=lambda q: f"#{q.anchor}", unit_label=unit, page="export", **context)
