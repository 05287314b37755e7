#!/usr/bin/env python3
"""How ``fabula lint`` does on human prose and how fast it is: flags per 1,000 words and seconds per 100K words.

Each argument is a run directory or a manuscript file (``.gz`` is read decompressed); without arguments the
Moby-Dick fixture of the import tests is measured. A human novel should raise almost no flags of the
machine-prose families (stock phrases, dialogue tags): those are its false positives.

    python scripts/lint_bench.py tests/fixtures/books/moby-dick-pg2701.txt.gz pride-and-prejudice.txt
"""

from __future__ import annotations

import argparse
import gzip
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "tests" / "fixtures" / "books" / "moby-dick-pg2701.txt.gz"


def chapters(target: Path) -> list[tuple[str, str]]:
    from agent.cli.lint_cmd import chapters_of

    if target.suffix != ".gz":
        return chapters_of(str(target))
    with tempfile.TemporaryDirectory() as folder:
        plain = Path(folder) / target.stem
        plain.write_bytes(gzip.decompress(target.read_bytes()))
        return chapters_of(str(plain))


def main() -> int:
    import sys

    sys.path.insert(0, str(ROOT))
    from agent.lint import lint_book, load_rules
    from agent.lint.report import FAMILIES, MACHINE_FAMILIES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", type=Path, default=[DEFAULT])
    parser.add_argument("--repeat", type=int, default=3, help="time the best of N lints (default 3)")
    args = parser.parse_args()
    rules = load_rules()
    for target in args.targets:
        texts = chapters(target)
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            report = lint_book(texts, rules)
            best = min(best, time.perf_counter() - start)
        families = "  ".join(f"{f} {report.per_thousand((f,)):.3f}" for f in FAMILIES)
        print(
            f"{target.name}: {len(texts)} chapters, {report.words} words; "
            f"{best * 100_000 / report.words:.2f} s per 100K words"
        )
        print(
            f"  flags per 1,000 words: all {report.score:.3f}, machine-prose families "
            f"{report.per_thousand(MACHINE_FAMILIES):.3f}  ({families})"
        )
        print(f"  by rule: {', '.join(f'{r} {n}' for r, n in report.by_rule()) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
