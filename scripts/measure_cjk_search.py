"""Compare CJK tokenisations for the chapter search on a small Chinese sample.

Usage: ``.venv/bin/python scripts/measure_cjk_search.py``. Prints MRR, hit@1 and hit@8 of
the window whose centre sentence holds the answer, for each variant. The winner is what
``agent/store/search.py`` uses; its docstring quotes these figures.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cjk_sample import CHAPTERS, QUERIES

from agent.store import search as fts
from agent.text import sentence_spans


def _unibi_query_both(q: str) -> list[str]:
    out: list[str] = []
    for m in fts._TERM.finditer(q):
        t = m.group()
        out += fts._grams(t, unigrams=True, bigrams=True) if fts._CJK_RUN.fullmatch(t) else [t]
    return list(dict.fromkeys(out))


def _uni_index(text: str) -> str:
    return fts._CJK_RUN.sub(lambda m: " " + " ".join(m.group()) + " ", text)


def _uni_query(q: str) -> list[str]:
    out: list[str] = []
    for m in fts._TERM.finditer(q):
        t = m.group()
        out += list(t) if fts._CJK_RUN.fullmatch(t) else [t]
    return list(dict.fromkeys(out))


def _trigrams(q: str) -> list[str]:
    out: list[str] = []
    for t in q.split():
        out += [t[i : i + 3] for i in range(max(1, len(t) - 2))]
    return list(dict.fromkeys(out))


Variant = tuple[str, str, Callable[[str], str], Callable[[str], list[str]]]
VARIANTS: list[Variant] = [
    ("unigram+bigram index, bigrams", "unicode61", fts.index_form, fts.query_terms),
    ("unigram+bigram, both in query", "unicode61", fts.index_form, _unibi_query_both),
    ("unigram index and query", "unicode61", _uni_index, _uni_query),
    ("trigram tokenizer, run = term", "trigram", lambda s: s, lambda q: q.split()),
    ("trigram tokenizer, 3-grams", "trigram", lambda s: s, _trigrams),
]


def evaluate(tokenizer: str, index: Callable[[str], str], terms: Callable[[str], list[str]]) -> tuple[float, ...]:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        f"CREATE VIRTUAL TABLE f USING fts5(chapter UNINDEXED, centre_text UNINDEXED, prev, centre, next, "
        f"tokenize='{tokenizer}')"
    )
    for chapter, text in CHAPTERS.items():
        sents = [text[a:b] for a, b in sentence_spans(text)]
        for i, s in enumerate(sents):
            prev = sents[i - 1] if i else ""
            nxt = sents[i + 1] if i + 1 < len(sents) else ""
            conn.execute("INSERT INTO f VALUES (?, ?, ?, ?, ?)", (chapter, s, index(prev), index(s), index(nxt)))
    rr = hit1 = hit8 = 0.0
    for query, chapter, phrase in QUERIES:
        expr = fts.match_expression(terms(query))
        rows = (
            conn.execute(
                "SELECT chapter, centre_text FROM f WHERE f MATCH ? ORDER BY bm25(f, 0, 0, 1.0, 3.0, 1.0) LIMIT 8",
                (expr,),
            ).fetchall()
            if expr
            else []
        )
        for rank, (c, centre) in enumerate(rows, 1):
            if c == chapter and phrase in centre:
                rr += 1 / rank
                hit1 += rank == 1
                hit8 += 1
                break
    n = len(QUERIES)
    return rr / n, hit1 / n, hit8 / n


def main() -> None:
    sentences = sum(len(sentence_spans(t)) for t in CHAPTERS.values())
    print(f"{len(QUERIES)} queries over {len(CHAPTERS)} chapters, {sentences} sentences")
    print(f"{'variant':32} {'MRR':>6} {'hit@1':>6} {'hit@8':>6}")
    for name, tokenizer, index, terms in VARIANTS:
        mrr, h1, h8 = evaluate(tokenizer, index, terms)
        print(f"{name:32} {mrr:6.3f} {h1:6.2f} {h8:6.2f}")


if __name__ == "__main__":
    main()
