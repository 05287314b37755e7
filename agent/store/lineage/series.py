"""A book's place in a series (``fabula sequel``): the earlier books, and a search over all of them.

A sequel is a run of its own whose plan names the books before it (``series``: the series' name,
this book's number, each earlier book's run directory, title and chapters). The writer's search
of a sequel covers every book: this one's chapters before the one in flight, and each earlier
book whole, opened read-only (never written; a book that moved or was deleted is left out of the
search, which goes on with the others). Hits from an earlier book carry its number.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from agent.store.errors import StoreError
from agent.store.runstore import RunStore
from agent.store.search import Hit
from agent.store.search_ref import SearchStyle

SERIES_KEY = "series"


def series(store: RunStore) -> dict[str, Any] | None:
    """The run's series record (``name``, ``index``, ``books``), or None for a book on its own."""
    value = store.plans.get(SERIES_KEY)
    return value if isinstance(value, dict) and value.get("books") else None


def named_series(record: Any, name: str) -> dict[str, Any]:
    """The series record ``record`` renamed ``name`` (``fabula export --series``); a book on its own
    becomes book 1 of the series, with no earlier book."""
    base = record if isinstance(record, dict) and isinstance(record.get("index"), int) else {"index": 1, "books": []}
    return {**base, "name": name}


def sequel_record(first: RunStore, title: str) -> dict[str, Any]:
    """The series record of a sequel to ``first`` (``title``: the first book's title); a sequel of a
    sequel continues its series, and a book one named in a series (``export --series``) gives its name."""
    earlier = series(first)
    books = [
        *(earlier["books"] if earlier else []),
        {
            "index": (earlier["index"] if earlier else 1),
            "run": str(first.run_dir.resolve()),
            "title": title,
            "chapters": first.info().last_unit,
        },
    ]
    named = first.plans.get(SERIES_KEY)
    name = named["name"] if isinstance(named, dict) and isinstance(named.get("name"), str) else title
    return {"name": name, "index": books[-1]["index"] + 1, "books": books}


def series_search(
    store: RunStore, query: str, *, k: int, before: int | None = None, style: SearchStyle = "fabula"
) -> list[Hit]:
    """The ``k`` best windows of this book (chapters below ``before``) and of every earlier book. ``style``
    "reference": every book's searchable chapters in one index, ranked together (agent.store.search_ref)."""
    record = series(store)
    if style == "reference":
        books: list[tuple[int, int, str]] = []
        for book in (record or {}).get("books", []):
            with contextlib.suppress(StoreError, OSError), RunStore.open(book["run"], readonly=True) as older:
                books += [(int(book["index"]), c.index, c.text) for c in older.chapters()]
        return store.reference_search(query, k=k, before=before, earlier=books)
    hits = store.search(query, k=k, before=before)
    for book in (record or {}).get("books", []):
        with contextlib.suppress(StoreError, OSError), RunStore.open(book["run"], readonly=True) as earlier:
            hits += [replace(hit, book=int(book["index"])) for hit in earlier.search(query, k=k)]
    return sorted(hits, key=lambda h: -h.score)[:k]
