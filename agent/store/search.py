"""The writer's ``search`` tool: BM25 over sentence windows in SQLite FTS5 (NstAgent A.1).

Every chapter is indexed as one window per sentence: the sentence before, the sentence, the
sentence after. The three parts are separate FTS5 columns and ranking is FTS5's built-in
``bm25()`` with column weights 1, 3, 1, so a hit in the centre sentence counts three times
(FTS5's k1 = 1.2 and b = 0.75 are left at their defaults, as the paper does). A window's
text is quoted from the chapter by offsets, never re-joined, so it is exact.

A query is split into terms and matched as an OR of quoted terms, so no user string can
reach FTS5's query syntax: quotes, ``*``, ``AND``/``OR``/``NOT``, parentheses and colons are
only separators, and a query without terms returns nothing. CJK runs are indexed as their
unigrams and bigrams and queried by their bigrams (one character by its unigram), since FTS5's
unicode61 tokenizer would make a whole CJK clause one token. Why bigrams, measured against
unigrams and the trigram tokenizer: docs/design/search.md.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

from agent.store.records import stored_text
from agent.text import CJK_CLASS, sentence_spans

MAX_TERMS = 64
"""Bound on query terms, so a pasted chapter costs milliseconds, not seconds."""

DEFAULT_K = 8
CENTRE_WEIGHT = 3.0
WINDOW_STRIDE = 1_000_000
"""A window's id is ``chapter * WINDOW_STRIDE + position``: "chapters before N" is then a rowid
range that FTS5 applies while it scans, with no join."""

_CJK_RUN = re.compile(f"[{CJK_CLASS}]+")
_TERM = re.compile(rf"[{CJK_CLASS}]+|(?:(?![{CJK_CLASS}])[^\W_])+")


@dataclass(frozen=True)
class Hit:
    """One search result: a window of chapter ``chapter`` centred on sentence ``position``."""

    chapter: int
    position: int
    score: float
    text: str
    book: int | None = None
    """In a series (``fabula sequel``): the number of the earlier book the window is from; None: this book."""
    context: tuple[str, str] | None = None
    """A reference-style hit (agent.store.search_ref): ``text`` is the centre sentence, this the ones around it."""

    def as_dict(self) -> dict[str, object]:
        found: dict[str, object] = {
            "chapter": self.chapter,
            "position": self.position,
            "score": self.score,
            "text": self.text,
        }
        return found if self.book is None else {**found, "book": self.book}


def _grams(run: str, *, unigrams: bool, bigrams: bool) -> list[str]:
    out = list(run) if unigrams or len(run) == 1 else []
    if bigrams:
        out += [run[i : i + 2] for i in range(len(run) - 1)]
    return out


def index_form(text: str) -> str:
    """The text FTS5 indexes: Latin as it is, each CJK run as its unigrams and bigrams."""
    return _CJK_RUN.sub(lambda m: " " + " ".join(_grams(m.group(), unigrams=True, bigrams=True)) + " ", text)


def query_terms(query: str, *, limit: int = MAX_TERMS) -> list[str]:
    """Split a query into terms (duplicates dropped, order kept, at most ``limit``)."""
    terms: list[str] = []
    seen: set[str] = set()
    for match in _TERM.finditer(query):
        token = match.group()
        pieces = _grams(token, unigrams=False, bigrams=True) if _CJK_RUN.fullmatch(token) else [token]
        for piece in pieces:
            key = piece.lower()
            if key not in seen:
                seen.add(key)
                terms.append(piece)
                if len(terms) >= limit:
                    return terms
    return terms


def dropped_terms(query: str) -> int:
    """How many distinct terms of ``query`` past :data:`MAX_TERMS` a search ignores (0 usually)."""
    return max(0, len(query_terms(query, limit=10 * MAX_TERMS)) - MAX_TERMS)


def match_expression(terms: list[str]) -> str:
    """An FTS5 query: the OR of the quoted terms (quotes inside a term are doubled)."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def windows(text: str) -> list[tuple[int, int, int, str, str, str]]:
    """``(position, start, end, prev, centre, next)`` for each sentence; position counts from 0."""
    spans = sentence_spans(text)
    forms = [index_form(text[a:b]) for a, b in spans]
    out = []
    for i, (a, b) in enumerate(spans):
        start = spans[i - 1][0] if i > 0 else a
        end = spans[i + 1][1] if i + 1 < len(spans) else b
        out.append((i, start, end, forms[i - 1] if i > 0 else "", forms[i], forms[i + 1] if i + 1 < len(spans) else ""))
    return out


def index_chapter(conn: sqlite3.Connection, chapter: int, text: str) -> int:
    """(Re)index one chapter's windows; call inside the transaction that writes its text."""
    conn.execute(
        "DELETE FROM chapter_windows WHERE id >= ? AND id < ?", (chapter * WINDOW_STRIDE, (chapter + 1) * WINDOW_STRIDE)
    )
    rows = [(chapter * WINDOW_STRIDE + w[0], chapter, *w) for w in windows(text)]
    if len(rows) >= WINDOW_STRIDE:
        raise ValueError(f"chapter {chapter} has {len(rows)} sentences; at most {WINDOW_STRIDE - 1} are indexed")
    conn.executemany(
        "INSERT INTO chapter_windows (id, chapter, position, start, end, prev, centre, next) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    return len(rows)


def search(conn: sqlite3.Connection, query: str, *, k: int = DEFAULT_K, before: int | None = None) -> list[Hit]:
    """The ``k`` best windows for ``query``; with ``before``, only chapters numbered below it.

    Speed: FTS5's bm25 gives a term found in half the windows or more an IDF of 1e-6, so such
    a term ("the", "was") cannot move a window by more than about 1e-5 yet costs a score for
    nearly every window. When the other terms still fill all ``k`` places, the ranking is
    computed without those terms; otherwise with every term. Ranks are the same either way.
    """
    terms = query_terms(query)
    if not terms or k <= 0:
        return []
    last = (1 << 62) // WINDOW_STRIDE
    limit = (min(before, last) if before is not None else last) * WINDOW_STRIDE
    if len(terms) > 1:
        total = conn.execute("SELECT count(*) FROM chapter_windows").fetchone()[0]
        informative = [t for t in terms if 2 * _rows_with(conn, t) < total]
        if informative and len(informative) < len(terms):
            hits = _ranked(conn, match_expression(informative), k, limit)
            if len(hits) == k:
                return hits
    return _ranked(conn, match_expression(terms), k, limit)


_PHRASE = re.compile(r'"([^"]+)"')


def phrases(query: str) -> list[str]:
    """The quoted phrases of a writer's query (``"universally acknowledged" truth``: one phrase)."""
    return [" ".join(p.split()) for p in _PHRASE.findall(query) if query_terms(p)]


def reader_search(conn: sqlite3.Connection, query: str, *, k: int = DEFAULT_K, before: int | None = None) -> list[Hit]:
    """A writer's search (``fabula search``, the view): :func:`search`, except that a quoted phrase must
    appear as written (its words in order, next to each other), and no sentence is shown twice (a hit
    whose centre sentence another, better hit's window already shows is dropped). The model's search tool
    stays :func:`search`, the paper's."""
    quoted = phrases(query)
    loose = query_terms(_PHRASE.sub(" ", query))
    if not quoted:
        found = search(conn, query, k=3 * k + 2, before=before)
    else:
        last = (1 << 62) // WINDOW_STRIDE
        limit = (min(before, last) if before is not None else last) * WINDOW_STRIDE
        required = " AND ".join('"' + " ".join(query_terms(p)).replace('"', '""') + '"' for p in quoted)
        expression = f"({required}) AND ({required} OR {match_expression(loose)})" if loose else required
        found = _ranked(conn, expression, 3 * k + 2, limit)
    kept: list[Hit] = []
    for hit in found:
        if not any(h.chapter == hit.chapter and abs(h.position - hit.position) <= 1 for h in kept):
            kept.append(hit)
        if len(kept) == k:
            break
    return kept


def highlights(text: str, query: str) -> list[tuple[int, int]]:
    """Where ``query``'s phrases and words (and words they begin, "acknowledge" in "acknowledged") are
    in ``text``: ``(start, end)`` spans in order, not overlapping."""
    patterns = [r"\s+".join(re.escape(w) for w in p.split()) for p in phrases(query)]
    patterns += [re.escape(t) + (r"\w*" if len(t) >= 3 else "") for t in query_terms(_PHRASE.sub(" ", query))]
    spans: list[tuple[int, int]] = []
    for pattern in patterns:
        for m in re.finditer(rf"(?<!\w){pattern}(?!\w)", text, flags=re.IGNORECASE):
            if not any(a < m.end() and m.start() < b for a, b in spans):
                spans.append((m.start(), m.end()))
    return sorted(spans)


def _rows_with(conn: sqlite3.Connection, term: str) -> int:
    return int(
        conn.execute(
            "SELECT count(*) FROM chapter_fts WHERE chapter_fts MATCH ?", (match_expression([term]),)
        ).fetchone()[0]
    )


def _ranked(conn: sqlite3.Connection, expression: str, k: int, limit: int) -> list[Hit]:
    # Rank and cut to k inside FTS5 first; only the k winners pay for quoting the chapter.
    rank = f"bm25(chapter_fts, 1.0, {CENTRE_WEIGHT}, 1.0)"
    sql = (
        "SELECT w.chapter, w.position, -top.rank, substr(c.text, w.start + 1, w.end - w.start) FROM ("
        f"  SELECT rowid AS id, {rank} AS rank FROM chapter_fts WHERE chapter_fts MATCH ? AND rowid < ?"
        "   ORDER BY rank, rowid LIMIT ?"
        ") AS top JOIN chapter_windows w ON w.id = top.id JOIN chapters c ON c.idx = w.chapter "
        "ORDER BY top.rank, w.id"
    )
    rows = conn.execute(sql, (expression, limit, k)).fetchall()
    return [Hit(int(r[0]), int(r[1]), float(r[2]), stored_text(r[3])) for r in rows]
