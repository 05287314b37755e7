"""Does the style distance separate authors? Prints the validation table for docs/design/style-measure.md.

Give a folder of Project Gutenberg plain-text files (the public-domain novels named below, by their
Gutenberg file names; they are not shipped). For each author, the sample is the first chapters of one
book (about SAMPLE_WORDS words); the test chapters are TEST_CHAPTERS chapters from the second half of
a book (another book by the same author where the folder has one). Each test chapter is measured
against every author's sample; it is "placed" when its own author's sample is the nearest.

    .venv/bin/python scripts/validate_style_measure.py /path/to/gutenberg-texts
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agent.manuscript.reading import read_manuscript
from agent.style.delta import DRIFT_THRESHOLD, profile

AUTHORS: dict[str, tuple[str, str]] = {
    # author: (sample book, test book) by Gutenberg file name
    "Dickens": ("pg98.txt", "pg1400.txt"),  # A Tale of Two Cities -> Great Expectations
    "Austen": ("pg1342.txt", "pg1342.txt"),  # Pride and Prejudice
    "Doyle": ("pg1661.txt", "pg1661.txt"),  # The Adventures of Sherlock Holmes
    "Shelley": ("pg84.txt", "pg84.txt"),  # Frankenstein
    "Stoker": ("pg345.txt", "pg345.txt"),  # Dracula
    "Melville": ("pg2701.txt", "pg2701.txt"),  # Moby-Dick
}
SAMPLE_WORDS = 5000
TEST_CHAPTERS = 6
CHAPTER_WORDS = 2500
"""Test chapters longer than this are cut to it (about a generated chapter's length)."""


def _segments(path: Path) -> list[str]:
    """The book's chapters of 800+ words, long ones cut into CHAPTER_WORDS-word segments."""
    out: list[str] = []
    for piece in read_manuscript(path).pieces:
        words = piece.text.split(" ")
        if piece.words < 800:
            continue
        step = max(1, int(len(words) * CHAPTER_WORDS / piece.words))
        out += [
            " ".join(words[i : i + step]) for i in range(0, len(words), step) if len(words[i : i + step]) > step // 2
        ]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    samples, tests = {}, {}
    for author, (sample_book, test_book) in AUTHORS.items():
        pieces = _segments(args.folder / sample_book)
        taken, words = [], 0
        while words < SAMPLE_WORDS:
            taken.append(pieces.pop(0))
            words += len(taken[-1].split())
        samples[author] = profile("\n\n".join(taken))
        pool = pieces if sample_book == test_book else _segments(args.folder / test_book)
        half = pool[len(pool) // 2 :]
        stride = max(1, len(half) // TEST_CHAPTERS)
        tests[author] = half[::stride][:TEST_CHAPTERS]
    names = list(AUTHORS)
    print("| test chapters of | " + " | ".join(f"{n} sample" for n in names) + " | placed |")
    print("|" + "---|" * (len(names) + 2))
    placed_all = total = pairs = pairs_won = 0
    own_all: list[float] = []
    other_all: list[float] = []
    for author in names:
        means = {n: 0.0 for n in names}
        placed = 0
        for chapter in tests[author]:
            scores = {n: samples[n].distance(chapter).total for n in names}
            for n in names:
                means[n] += scores[n] / len(tests[author])
            placed += min(scores, key=scores.__getitem__) == author
            pairs += len(names) - 1
            pairs_won += sum(scores[author] < s for n, s in scores.items() if n != author)
            own_all.append(scores[author])
            other_all += [s for n, s in scores.items() if n != author]
        placed_all += placed
        total += len(tests[author])
        cells = [f"**{means[n]:.2f}**" if n == author else f"{means[n]:.2f}" for n in names]
        print(f"| {author} | " + " | ".join(cells) + f" | {placed}/{len(tests[author])} |")
    own_all.sort()
    other_all.sort()
    print()
    print(f"placed with their own author: {placed_all}/{total}")
    print(f"pairs (chapter, other author) where the own author's sample is nearer: {pairs_won}/{pairs}")
    print(f"own-author distance: median {own_all[len(own_all) // 2]:.2f}, max {own_all[-1]:.2f}")
    print(f"other-author distance: median {other_all[len(other_all) // 2]:.2f}, min {other_all[0]:.2f}")
    flagged_own = sum(d > DRIFT_THRESHOLD for d in own_all)
    flagged_other = sum(d > DRIFT_THRESHOLD for d in other_all)
    print(
        f"drift threshold {DRIFT_THRESHOLD}: flags {flagged_own}/{len(own_all)} own-author chapters, "
        f"{flagged_other}/{len(other_all)} other-author chapters"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
