"""Benchmark the run store on a 100,000-word story in 40 chapters (issue 3).

Usage: ``.venv/bin/python scripts/bench_store.py [--words 100000] [--chapters 40] [--queries 200]``

The story is generated text of realistic shape: sentence lengths drawn from a log-normal
(median about 14 words), a Zipf-distributed vocabulary with a small cast of names, dialogue
and paragraphs. Prints, for the store on a real file (WAL, synchronous=FULL):

- indexing per chapter: the sentence windows and FTS5 rows alone, and the whole chapter
  commit (text, windows, state, progress, fsync);
- search latency p50/p95 over the queries (1 to 4 terms drawn from the story: names and
  content words, sometimes a function word), over all chapters and as the writer of the
  last chapter sees them; and, apart, queries made only of the commonest words (the worst
  case: every window matches and every window must be scored);
- reindex of one chapter after a ``correct`` (the whole transaction) and the index part alone.

Targets from the issue: search p95 < 10 ms; indexing and reindexing a 2,500-word chapter
< 100 ms. The script prints figures and whether each target is met; it asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_results import write_results  # scripts/ is on sys.path when a script runs

from agent.store import RunStore
from agent.store import search as fts
from agent.store.db import atomic
from agent.text import count_words

NAMES = ["Mara", "Haldane", "Ilsa", "Tomas", "Vale", "Okonkwo", "Reyes", "Lucia", "Brennan", "Asha", "Corvin", "Yusuf"]
SYLLABLES = [
    "ka",
    "lo",
    "mer",
    "tin",
    "sa",
    "dor",
    "vel",
    "an",
    "ri",
    "qu",
    "es",
    "ton",
    "bra",
    "li",
    "um",
    "or",
    "de",
    "na",
    "sh",
    "ph",
    "ar",
    "en",
    "il",
    "ot",
]
COMMON = [
    "the",
    "of",
    "and",
    "to",
    "a",
    "in",
    "was",
    "he",
    "she",
    "it",
    "that",
    "his",
    "her",
    "had",
    "with",
    "for",
    "as",
    "on",
    "at",
    "by",
    "but",
    "not",
    "they",
    "from",
    "were",
    "said",
    "there",
    "one",
    "all",
    "been",
    "their",
    "we",
    "would",
    "what",
    "so",
    "out",
    "up",
    "into",
    "when",
    "who",
    "could",
    "them",
    "then",
    "some",
    "than",
    "like",
    "only",
    "over",
    "back",
    "after",
    "down",
    "again",
    "before",
    "through",
    "under",
    "night",
    "door",
    "light",
    "hand",
    "eyes",
    "voice",
    "room",
    "water",
    "house",
    "road",
]


def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    words = set(COMMON)
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))))
    ordered = list(COMMON) + sorted(words - set(COMMON))
    return ordered


def sentence(rng: random.Random, vocab: list[str], weights: list[float]) -> str:
    n = max(3, min(60, int(rng.lognormvariate(math.log(14), 0.5))))
    words = rng.choices(vocab, weights=weights, k=n)
    if rng.random() < 0.35:
        words[rng.randrange(n)] = rng.choice(NAMES)
    for i in range(2, n - 1):
        if rng.random() < 0.07:
            words[i] += ","
    text = " ".join(words)
    text = text[0].upper() + text[1:] + rng.choice([".", ".", ".", ".", "?", "!"])
    if rng.random() < 0.2:
        text = f"“{text}” {rng.choice(NAMES)} said."
    return text


def chapter(rng: random.Random, vocab: list[str], weights: list[float], target: int) -> str:
    paragraphs, words = [], 0
    while words < target:
        paragraph = " ".join(sentence(rng, vocab, weights) for _ in range(rng.randint(2, 7)))
        paragraphs.append(paragraph)
        words += count_words(paragraph)
    return "\n\n".join(paragraphs)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=100_000)
    parser.add_argument("--chapters", type=int, default=40)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", help="where to write the figures (default bench-results/bench_store.json)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    vocab = vocabulary(rng)
    weights = [1 / (rank + 1) ** 1.05 for rank in range(len(vocab))]
    per_chapter = args.words // args.chapters
    texts = [chapter(rng, vocab, weights, per_chapter) for _ in range(args.chapters)]
    total_words = sum(count_words(t) for t in texts)
    sentences = sum(len(fts.windows(t)) for t in texts)

    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore.create(Path(tmp) / "bench", pipeline="nst", config={"bench": True})
        index_ms, commit_ms = [], []
        for i, text in enumerate(texts, 1):
            started = time.perf_counter()
            store.commit_chapter(i, f"Chapter {i}", text, state={"chapter": i, "events": list(range(i * 4))})
            commit_ms.append((time.perf_counter() - started) * 1000)
        conn = store._conn  # the index part alone, timed on the same database
        for i, text in enumerate(texts, 1):
            with atomic(conn):
                started = time.perf_counter()
                fts.index_chapter(conn, i, text)
                index_ms.append((time.perf_counter() - started) * 1000)

        # A writer's queries: names and content words, sometimes a function word among them
        # ("the silver key"); plus two adversarial ones reported apart.
        all_words = [w.strip(",.?!") for t in texts for w in t.replace("“", " ").replace("”", " ").split()]
        function_words = set(COMMON)
        content_words = [w for w in all_words if w.lower() not in function_words and w not in NAMES]
        queries = []
        for _ in range(args.queries):
            picks = []
            for _ in range(rng.randint(1, 4)):
                roll = rng.random()
                picks.append(
                    rng.choice(NAMES)
                    if roll < 0.3
                    else rng.choice(content_words)
                    if roll < 0.85
                    else rng.choice(COMMON[:40])
                )
            queries.append(" ".join(picks))
        for q in queries[:10]:  # warm the page cache as a running writer would have
            store.search(q)
        search_ms, search_before_ms, hits = [], [], 0
        for q in queries:
            started = time.perf_counter()
            found = store.search(q)
            search_ms.append((time.perf_counter() - started) * 1000)
            hits += bool(found)
            started = time.perf_counter()
            store.search(q, before=args.chapters)
            search_before_ms.append((time.perf_counter() - started) * 1000)

        adversarial = {}
        for q in ("the", "the was and of"):
            times = []
            for _ in range(20):
                started = time.perf_counter()
                store.search(q)
                times.append((time.perf_counter() - started) * 1000)
            adversarial[q] = times

        mid = args.chapters // 2
        reindex_ms, reindex_only_ms = [], []
        for rep in range(10):
            text = store.chapter(mid).text
            old = text.split(".")[rep].strip()[:20]
            if not old or text.count(old) != 1:
                continue
            started = time.perf_counter()
            store.correct_chapter(mid, old, old.upper())
            reindex_ms.append((time.perf_counter() - started) * 1000)
        with atomic(conn):
            started = time.perf_counter()
            fts.index_chapter(conn, mid, store.chapter(mid).text)
            reindex_only_ms.append((time.perf_counter() - started) * 1000)
        size = store.path.stat().st_size + (
            Path(str(store.path) + "-wal").stat().st_size if Path(str(store.path) + "-wal").exists() else 0
        )
        store.close()

    figures: dict[str, dict[str, object]] = {}

    def line(name: str, values: list[float], target: float | None = None, stat: str = "p50") -> None:
        p50, p95, worst = pct(values, 0.5), pct(values, 0.95), max(values)
        verdict = ""
        figures[name] = {"p50_ms": round(p50, 3), "p95_ms": round(p95, 3), "max_ms": round(worst, 3)}
        if target is not None:
            measured = p95 if stat == "p95" else worst
            met = measured < target
            verdict = f"   target {stat} < {target:g} ms: {'met' if met else 'missed'}"
            figures[name].update(target=f"{stat} < {target:g} ms", met=met)
        print(f"  {name:44} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms  max {worst:7.2f} ms{verdict}")

    print(
        f"story: {total_words} words, {len(texts)} chapters (~{total_words // len(texts)} words each), "
        f"{sentences} sentence windows; database {size / 1e6:.1f} MB"
    )
    print(f"sqlite {__import__('sqlite3').sqlite_version}, python {sys.version.split()[0]}")
    line("index one chapter (windows + FTS rows)", index_ms, 100, "max")
    line("commit one chapter (all of it, with fsync)", commit_ms, 100, "max")
    line(f"search, all chapters ({len(queries)} queries)", search_ms, 10, "p95")
    line("search, chapters before the last", search_before_ms, 10, "p95")
    for q, times in adversarial.items():
        line(f"search {q!r} (only the commonest words)", times)
    line("reindex after correct (whole transaction)", reindex_ms, 100, "max")
    line("reindex, index part alone", reindex_only_ms)
    print(f"  queries with at least one hit: {hits}/{len(queries)}")
    write_results(
        "bench_store",
        {
            "words": total_words,
            "chapters": len(texts),
            "windows": sentences,
            "database_bytes": size,
            "queries": len(queries),
            "queries_with_hits": hits,
            "figures": figures,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
