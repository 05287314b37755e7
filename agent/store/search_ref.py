"""The writer's search as the NstAgent reference code ranks it (``search_style="reference"``, the paper profile).

One row per sentence of the reference's sentence split; its one indexed column holds the centre
sentence's tokens three times and the neighbours' once, ranked by FTS5's plain ``bm25()`` over an
in-memory index of exactly the chapters searchable now, ties toward later chapters. How and why:
docs/design/search.md.
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from agent.store.search import MAX_TERMS, Hit, match_expression

SearchStyle = Literal["fabula", "reference"]

CENTRE_REPEAT = 3
"""The centre sentence's tokens stand three times in its row (the neighbours' once)."""
MIN_QUERY_TOKEN = 2
"""Query tokens shorter than this are dropped (digits kept), unless no token is left."""
THIS_BOOK = 1 << 30
"""The book key of the run's own chapters: after every earlier book of a series, so its ties come first."""

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_CJK_CHAR = re.compile(f"[{_CJK}]")
_ASCII_WORD = re.compile(r"c\+\+|c#|(?:(?!c\+\+|c#)[a-z0-9])+(?:\.[0-9]+)?%?")
"""A word as jieba's default mode cuts ASCII: letters and digits, a decimal and ``%`` kept on a number, and
the two lowercase ASCII words of its dictionary (``c++``, ``c#``) cut out wherever they stand."""
_SENTENCE_END = re.compile(r"(?<=[。！？!?.\n])\s+|(?<=[。！？!?])(?=\S)")


def tokens(text: str, *, query: bool = False) -> list[str]:
    """The distinct tokens of ``text`` in order: ASCII words (:data:`_ASCII_WORD`), every
    other letter or digit alone, then each CJK run's characters and bigrams. A query drops its tokens shorter
    than :data:`MIN_QUERY_TOKEN` that are not digits, unless that would drop them all."""
    norm = unicodedata.normalize("NFKC", text).lower()
    found: dict[str, None] = {}
    at = 0
    while at < len(norm):
        word = _ASCII_WORD.match(norm, at)
        if word:
            found.setdefault(word.group())
            at = word.end()
            continue
        if norm[at].isalnum() and not _CJK_CHAR.match(norm[at]):
            found.setdefault(norm[at])
        at += 1
    for run in _CJK_RUN.findall(norm):
        for gram in [*run, *(run[i : i + 2] for i in range(len(run) - 1))]:
            found.setdefault(gram)
    out = list(found)
    if not query:
        return out
    return [t for t in out if len(t) >= MIN_QUERY_TOKEN or t.isdigit()] or out


def sentences(text: str) -> list[str]:
    """The reference's sentence split: after 。！？!?. or a newline where whitespace follows, and after
    。！？!? where none does; each part stripped, empty parts dropped."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]


def rows(text: str) -> list[tuple[int, str, str, str, str]]:
    """``(position, before, sentence, after, indexed)`` per sentence that has a token; ``indexed`` is the
    centre's tokens :data:`CENTRE_REPEAT` times, then the sentence before's and the one after's."""
    parts = sentences(text)
    toks = [tokens(p) for p in parts]
    out = []
    for i, sentence in enumerate(parts):
        before = parts[i - 1] if i > 0 else ""
        after = parts[i + 1] if i + 1 < len(parts) else ""
        context = (toks[i - 1] if i > 0 else []) + (toks[i + 1] if i + 1 < len(parts) else [])
        indexed = " ".join(toks[i] * CENTRE_REPEAT + context)
        if indexed:
            out.append((i, before, sentence, after, indexed))
    return out


class ReferenceIndex:
    """An in-memory index of the chapters a search may see, kept in step with them: a chapter is
    (re)indexed when its text is new or changed, dropped when it is no longer searchable."""

    def __init__(self) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._conn.executescript(
            "CREATE TABLE windows (id INTEGER PRIMARY KEY, book INTEGER, chapter INTEGER, position INTEGER,"
            " before TEXT, sentence TEXT, after TEXT);"
            "CREATE INDEX windows_unit ON windows (book, chapter);"
            "CREATE VIRTUAL TABLE windows_fts USING fts5(indexed, tokenize = 'unicode61');"
        )
        self._texts: dict[tuple[int, int], str] = {}

    def sync(self, texts: Mapping[tuple[int, int], str]) -> None:
        """Index exactly ``texts``, keyed ``(book, chapter)`` (book :data:`THIS_BOOK`: the run's own)."""
        stale = [key for key, text in self._texts.items() if texts.get(key) != text]
        new = [key for key, text in texts.items() if self._texts.get(key) != text]
        if not stale and not new:
            return
        with self._conn:
            for book, chapter in stale:
                ids = "SELECT id FROM windows WHERE book = ? AND chapter = ?"
                self._conn.execute(f"DELETE FROM windows_fts WHERE rowid IN ({ids})", (book, chapter))
                self._conn.execute("DELETE FROM windows WHERE book = ? AND chapter = ?", (book, chapter))
            for book, chapter in new:
                for position, before, sentence, after, indexed in rows(texts[(book, chapter)]):
                    cursor = self._conn.execute(
                        "INSERT INTO windows (book, chapter, position, before, sentence, after)"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                        (book, chapter, position, before, sentence, after),
                    )
                    self._conn.execute(
                        "INSERT INTO windows_fts (rowid, indexed) VALUES (?, ?)", (cursor.lastrowid, indexed)
                    )
        for key in stale:
            del self._texts[key]
        self._texts.update({key: texts[key] for key in new})

    def search(self, query: str, k: int) -> list[Hit]:
        """The ``k`` best rows for ``query``: BM25 first, then the later book and chapter, then the earlier sentence."""
        terms = tokens(query, query=True)[:MAX_TERMS]
        if not terms or k <= 0 or not self._texts:
            return []
        found = self._conn.execute(
            "SELECT w.book, w.chapter, w.position, -top.rank, w.before, w.sentence, w.after FROM ("
            "  SELECT rowid AS id, bm25(windows_fts) AS rank FROM windows_fts WHERE windows_fts MATCH ?"
            ") AS top JOIN windows w ON w.id = top.id "
            "ORDER BY top.rank, w.book DESC, w.chapter DESC, w.position LIMIT ?",
            (match_expression(terms), k),
        ).fetchall()
        return [
            Hit(chapter, position, score, sentence, None if book == THIS_BOOK else book, context=(before, after))
            for book, chapter, position, score, before, sentence, after in found
        ]


def dropped_terms(query: str) -> int:
    """How many of ``query``'s tokens past :data:`MAX_TERMS` a reference search ignores (0 usually)."""
    return max(0, len(tokens(query, query=True)) - MAX_TERMS)


def hit_record(hit: Hit) -> dict[str, Any]:
    """One hit as the reference returns it: ``chapter_id``, ``sentence``, ``before``, ``after`` (and the
    earlier book's number in a series, which the reference has no notion of)."""
    before, after = hit.context or ("", "")
    found: dict[str, Any] = {"chapter_id": hit.chapter, "sentence": hit.text, "before": before, "after": after}
    return found if hit.book is None else {**found, "book": hit.book}


def result_json(query: str, hits: Iterable[dict[str, Any]], **extra: Any) -> str:
    """A search's answer in the reference's shape: ``ok``, ``budget_charged``, ``query``, ``hits``,
    ``hit_count`` (``extra`` keys only when given), as JSON with non-ASCII text as it is."""
    found = list(hits)
    result = {"ok": True, "budget_charged": True, "query": query, "hits": found, "hit_count": len(found)}
    return json.dumps({**result, **{key: value for key, value in extra.items() if value}}, ensure_ascii=False)
