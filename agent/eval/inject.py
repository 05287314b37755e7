"""``fabula eval inject``: the judge recall check of NstAgent Appendix B.1.

Each copy of a story gets one planted pair of explicit statements: the later half inside the
terminal window (at the paragraph boundary nearest the window's word midpoint), the earlier
half at a chosen depth of the text before it: ``adjacent`` (just before the window, or just
before the later half when every chapter is in scope), ``midpoint`` (of that prefix) or
``opening`` (after the first paragraph of chapter 1). Magnet stories are edited the same way
on their goal sections (``agent.eval.story``): the paragraph holding the spot is revised,
its earlier text kept as a version. Contradicting pairs cover the five
categories; control pairs agree with each other. Each pair carries a unique marker that
occurs exactly twice in its copy, so detection is an exact string match in the judge's
reported instances, not a semantic judgment.
"""

from __future__ import annotations

import json
import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.eval.ced import best_scores
from agent.eval.story import Story, load_story, magnet_groups
from agent.eval.windows import choose_window
from agent.store import RunStore, StoreError
from agent.store.paths import DB_NAME, resolve_run_dir
from agent.text import count_words

DEPTHS = ("adjacent", "midpoint", "opening")
PLAN_KEY = "eval_injection"

# (category, target subtype, earlier, later); {m} is the marker.
CONTRADICTIONS = (
    (
        "characterization",
        "memory_contradictions",
        "Old {m} had never once been to sea; he told anyone who asked that he had never set foot on a ship.",
        "Old {m} smiled, remembering the twenty years he had spent as a sailor on the open sea.",
    ),
    (
        "factual_detail",
        "appearance_mismatches",
        "The door of the {m} inn was painted a bright, unmistakable red.",
        "The door of the {m} inn was painted a deep green, as it always had been; it had never been any other colour.",
    ),
    (
        "narrative_style",
        "perspective_confusions",
        "This account is set down by the chronicler {m}, who was never present and never speaks of himself.",
        "I, the chronicler {m}, was there that night, and I saw all of it with my own eyes.",
    ),
    (
        "timeline_plot",
        "absolute_time_contradictions",
        "The great fire at the {m} mill happened on the first day of winter, exactly ten years ago.",
        "The great fire at the {m} mill had happened only last spring, less than a year ago.",
    ),
    (
        "world_building",
        "core_rules_violations",
        "Everyone knew the one unbreakable law of this world: no living hand could touch the {m} stones and survive.",
        "She picked up one of the {m} stones with her bare hand, turned it over, and walked on unharmed.",
    ),
)
CONTROLS = (
    (
        "factual_detail",
        "appearance_mismatches",
        "The door of the {m} inn was painted a bright red.",
        "She passed the {m} inn again, its red door bright in the evening light.",
    ),
    (
        "characterization",
        "memory_contradictions",
        "Old {m} had worked as a baker for thirty years.",
        "Old {m}, the baker, was already at his ovens when the sun came up.",
    ),
)
_NAMES = ("Varnholt", "Quillbrede", "Ostrevane", "Mirrowick", "Tallowmere", "Brenwhistle", "Cadrellis", "Hexbourne")


@dataclass(frozen=True)
class Spot:
    section: int
    """0-based position of the section."""
    offset: int
    word: int
    """Words of the story before this point."""


def _boundaries(story: Story) -> list[Spot]:
    """Every paragraph boundary of the story (start and end of each section included)."""
    spots: list[Spot] = []
    before = 0
    for pos, sec in enumerate(story.sections):
        offsets = [0] + [i + 2 for i in range(len(sec.text)) if sec.text.startswith("\n\n", i)] + [len(sec.text)]
        for off in sorted(set(offsets)):
            spots.append(Spot(pos, off, before + count_words(sec.text[:off])))
        before += sec.words
    return spots


def _nearest(spots: list[Spot], word: float) -> Spot:
    return min(spots, key=lambda s: (abs(s.word - word), s.word))


def placements(story: Story, first: int, depth: str) -> tuple[Spot, Spot]:
    """``(earlier, later)`` insertion points for one pair in a story whose window starts at
    section ``first`` (1-based)."""
    spots = _boundaries(story)
    window = [s for s in spots if s.section >= first - 1 and not (s.section == first - 1 and s.offset == 0)]
    start_word = sum(sec.words for sec in story.sections[: first - 1])
    later = _nearest(window or spots, start_word + (story.words - start_word) / 2)
    prefix = [s for s in spots if s.word <= later.word and (s.section, s.offset) < (later.section, later.offset)]
    if first > 1:
        prefix = [s for s in prefix if s.section < first - 1]
    if not prefix:
        prefix = [spots[0]]
    if depth == "adjacent":
        earlier = prefix[-1]
    elif depth == "midpoint":
        earlier = _nearest(prefix, prefix[-1].word / 2)
    elif depth == "opening":
        opening = [s for s in prefix if s.section == 0]
        earlier = opening[1] if len(opening) > 2 else opening[0] if opening else prefix[0]
    else:
        raise ValueError(f"unknown depth {depth!r}; use {', '.join(DEPTHS)}")
    return earlier, later


def _insert(text: str, offset: int, statement: str) -> str:
    if offset == 0:
        return f"{statement}\n\n{text}"
    if offset >= len(text):
        return f"{text}\n\n{statement}"
    return f"{text[:offset]}{statement}\n\n{text[offset:]}"


def _insert_in_paragraphs(store: RunStore, spot: Spot, statement: str) -> None:
    """Plant ``statement`` at ``spot`` of a Magnet story by revising the one paragraph that holds
    that offset of its section (sections join paragraphs with a blank line), so the story
    reads exactly as a chapter insertion at the same spot would."""
    paragraphs = magnet_groups(store)[spot.section][1]
    start = 0
    for p in paragraphs:
        if spot.offset <= start + len(p.text):
            store.revise_paragraph(p.step, p.seq, _insert(p.text, spot.offset - start, statement), reason="eval-inject")
            return
        start += len(p.text) + 2
    raise StoreError(f"no paragraph at offset {spot.offset} of section {spot.section + 1}")


def _marker(rng: random.Random, text: str) -> str:
    while True:
        marker = f"{rng.choice(_NAMES)}{rng.randint(100, 999)}"
        if marker not in text:
            return marker


def _copy_run(source: Path, target: Path) -> None:
    if (target / DB_NAME).exists():
        raise StoreError(f"{target} already holds a run; choose an empty --out folder")
    target.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(f"{(source / DB_NAME).as_uri()}?mode=ro", uri=True)
    dst = sqlite3.connect(str(target / DB_NAME))
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def inject(
    store: RunStore,
    *,
    category: str,
    subtype: str,
    earlier: str,
    later: str,
    depth: str,
    control: bool,
    marker: str,
    window_chapters: int | None = None,
) -> dict[str, Any]:
    """Plant one pair in ``store`` (a copy) and record it in the plan; returns the record."""
    story = load_story(store)
    window = choose_window(story, chapters=window_chapters)
    first_spot, later_spot = placements(story, window.first, depth)
    a, b = earlier.format(m=marker), later.format(m=marker)
    # insert the later half first, so the earlier offset stays valid when both share a section
    if store.info().unit_kind == "chapter":
        texts = [s.text for s in story.sections]
        texts[later_spot.section] = _insert(texts[later_spot.section], later_spot.offset, b)
        texts[first_spot.section] = _insert(texts[first_spot.section], first_spot.offset, a)
        for pos in {first_spot.section, later_spot.section}:
            store.revise_chapter(story.sections[pos].index, texts[pos], reason="eval-inject")
    else:
        _insert_in_paragraphs(store, later_spot, b)
        _insert_in_paragraphs(store, first_spot, a)
    full = load_story(store).text
    if full.count(marker) != 2:
        raise StoreError(f"marker {marker} occurs {full.count(marker)} times, not twice")
    record = {
        "category": category,
        "subtype": subtype,
        "depth": depth,
        "control": control,
        "marker": marker,
        "earlier": a,
        "later": b,
        "earlier_chapter": first_spot.section + 1,
        "later_chapter": later_spot.section + 1,
        "earlier_word": first_spot.word,
        "later_word": later_spot.word + count_words(a),
        "window_first": window.first,
        "distance_words": later_spot.word - first_spot.word,
    }
    store.plans.put(PLAN_KEY, record)
    return record


def make_injected_copies(
    run_dir: str | Path,
    out: Path,
    *,
    depths: list[str],
    controls: int = 2,
    seed: int = 0,
    window_chapters: int | None = None,
) -> list[Path]:
    """One copy per (category, depth) plus ``controls`` control copies, under ``out``."""
    source = resolve_run_dir(run_dir)
    rng = random.Random(seed)
    with RunStore.open(source, readonly=True) as store:
        text = load_story(store).text
    jobs = [(c, s, e, lt, d, False) for c, s, e, lt in CONTRADICTIONS for d in depths]
    jobs += [(*CONTROLS[i % len(CONTROLS)], depths[i % len(depths)], True) for i in range(controls)]
    copies = []
    used: set[str] = set()
    for n, (category, subtype, earlier, later, depth, control) in enumerate(jobs, start=1):
        marker = _marker(rng, text + " ".join(used))
        used.add(marker)
        target = out / f"{n:02d}-{'control' if control else category}-{depth}"
        _copy_run(source, target)
        with RunStore.open(target) as copy:
            inject(
                copy,
                category=category,
                subtype=subtype,
                earlier=earlier,
                later=later,
                depth=depth,
                control=control,
                marker=marker,
                window_chapters=window_chapters,
            )
        copies.append(target)
    return copies


def detection(store: RunStore) -> dict[str, Any] | None:
    """Whether the judge reported the planted marker, under the target subtype, category or any;
    ``None`` when the copy has no complete judgment."""
    record = store.plans.get(PLAN_KEY)
    story = load_story(store)
    scores = best_scores(store, story)
    if record is None or not scores:
        return None
    marker = record["marker"]
    hits = [i for i in scores[0].instances if marker in json.dumps(i.reply, ensure_ascii=False)]
    return {
        **record,
        "judge": scores[0].judge,
        "subtype_hit": any(i.subtype == record["subtype"] for i in hits),
        "category_hit": any(i.category == record["category"] for i in hits),
        "any_hit": bool(hits),
        "reports": len(hits),
    }


def recall_table(copies: list[Path]) -> dict[str, Any]:
    rows, unscored = [], []
    for copy in copies:
        with RunStore.open(copy, readonly=True) as store:
            found = detection(store)
        (rows.append(found) if found else unscored.append(str(copy)))
    cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        if not row["control"]:
            cells.setdefault((row["category"], row["depth"]), []).append(row)
    controls = [r for r in rows if r["control"]]
    return {"cells": cells, "controls": controls, "unscored": unscored}


def render_recall(table: dict[str, Any]) -> list[str]:
    lines = [
        "| category | depth | n | distance (words) | target subtype | target category | any |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (category, depth), rows in sorted(table["cells"].items()):
        n = len(rows)
        dist = ", ".join(str(r["distance_words"]) for r in rows)
        lines.append(
            f"| {category} | {depth} | {n} | {dist} | {sum(r['subtype_hit'] for r in rows)}/{n} | "
            f"{sum(r['category_hit'] for r in rows)}/{n} | {sum(r['any_hit'] for r in rows)}/{n} |"
        )
    c = table["controls"]
    lines.append("")
    lines.append(
        f"Controls (no contradiction; any report is a false positive): {len(c)} judged, "
        f"{sum(r['category_hit'] for r in c)} reported under the target category, "
        f"{sum(r['any_hit'] for r in c)} under any."
    )
    if table["unscored"]:
        lines.append(f"Not scored (failed or missing judgments, excluded): {', '.join(table['unscored'])}")
    return lines
