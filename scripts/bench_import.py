#!/usr/bin/env python3
"""``fabula import`` on a real novel: import time, then search p95 over ~50 queries (#24 item 1).

The novel is the test fixture (Moby-Dick, Project Gutenberg #2701, 136 chapters, 211K words by the
store's rule), or any FILE given. The import is timed as the CLI runs it (read, split, commit every
chapter with its search windows); each query is a word pair drawn (seeded) from a chapter of the
book and timed through ``RunStore.search`` as ``fabula search`` calls it; p50/p95/max in ms.

    .venv/bin/python scripts/bench_import.py
    .venv/bin/python scripts/bench_import.py --file book.epub --queries 100

Prints one table; writes nothing outside a temporary folder. No model is loaded.
"""

from __future__ import annotations

import argparse
import gzip
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.manuscript import read_manuscript  # noqa: E402
from agent.manuscript.importer import source_config, write_run  # noqa: E402
from agent.store import RunStore  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "books" / "moby-dick-pg2701.txt.gz"
WORD = re.compile(r"[A-Za-z]{5,}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, help="the manuscript (default: the Moby-Dick fixture)")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=24)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        source = args.file
        if source is None:
            source = Path(tmp) / "moby-dick.txt"
            source.write_bytes(gzip.decompress(FIXTURE.read_bytes()))
        began = time.perf_counter()
        manuscript = read_manuscript(source)
        read_s = time.perf_counter() - began
        run = write_run(manuscript, str(Path(tmp) / "run"), source_config(source, manuscript, None))
        import_s = time.perf_counter() - began
        with RunStore.open(run, readonly=True) as store:
            chapters = store.chapters()
            rng = random.Random(args.seed)
            queries = []
            for _ in range(args.queries):
                words = WORD.findall(rng.choice(chapters).text)
                queries.append(" ".join(rng.sample(words, 2)))
            times, answered = [], 0
            for query in queries:
                start = time.perf_counter()
                hits = store.search(query, k=8)
                times.append((time.perf_counter() - start) * 1000)
                answered += bool(hits)
    ranked = sorted(times)
    p95 = ranked[min(len(ranked) - 1, round(0.95 * (len(ranked) - 1)))]
    print(f"book            {source.name}: {len(manuscript.pieces)} chapters, {manuscript.words} words")
    print(
        f"import          {import_s:.2f} s  (read and split {read_s:.2f} s, commit and index {import_s - read_s:.2f} s)"
    )
    print(
        f"search          {len(times)} queries ({answered} answered), p50 {statistics.median(times):.2f} ms, "
        f"p95 {p95:.2f} ms, max {ranked[-1]:.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
