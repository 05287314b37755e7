#!/usr/bin/env python3
"""Build ``agent/lint/data/reference_en.tsv``: how often each common English word occurs, per million words.

``fabula lint`` calls a word overused when a chapter uses it far more often than this reference does. The
reference is built from public-domain novels that are *not* the ones the lint benchmark measures (so the
benchmark's false positives are honest); the files are given on the command line, e.g. Project Gutenberg's
Alice (pg11), Peter Pan (pg16), Sherlock Holmes (pg1661), Dorian Gray (pg174) and The Jungle Book (pg236):

    python scripts/lint_reference.py pg11.txt pg16.txt pg1661.txt pg174.txt pg236.txt
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "agent" / "lint" / "data" / "reference_en.tsv"
WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=6000, help="keep the most frequent N words (default 6000)")
    args = parser.parse_args()
    counts: Counter[str] = Counter()
    for path in args.files:
        counts.update(WORD.findall(path.read_text(encoding="utf-8", errors="replace").lower()))
    total = sum(counts.values())
    lines = [
        f"# words per million in {total} words of {len(args.files)} public-domain novels (scripts/lint_reference.py)"
    ]
    lines += [f"{word}\t{count * 1e6 / total:.1f}" for word, count in counts.most_common(args.top)]
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{OUT.name}: {args.top} words from {total} words")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
