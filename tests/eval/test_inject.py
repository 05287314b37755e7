"""Injection placement: markers occur exactly twice, at the asked depths; recall by exact match."""

from __future__ import annotations

import re

import pytest

from agent.eval.consistency import judge_consistency
from agent.eval.inject import CONTRADICTIONS, PLAN_KEY, make_injected_copies, recall_table, render_recall
from agent.eval.judge import Judge
from agent.eval.story import load_story
from agent.store import RunStore
from tests.eval.helpers import judge_llm, make_run, schema_name, words


def chapter(n: int) -> str:
    return "\n\n".join(words(100, f"c{n}p{p}") for p in range(3))


@pytest.fixture
def source(tmp_path):
    return make_run(tmp_path, "src", [chapter(n) for n in range(1, 7)], target=50_000)


def test_markers_occur_twice_at_the_asked_depths(source, tmp_path):
    copies = make_injected_copies(
        source, tmp_path / "inj", depths=["adjacent", "midpoint", "opening"], controls=2, window_chapters=2
    )
    assert len(copies) == 5 * 3 + 2
    seen = set()
    for copy in copies:
        with RunStore.open(copy, readonly=True) as store:
            record = store.plans.get(PLAN_KEY)
            story = load_story(store)
        marker = record["marker"]
        assert marker not in seen
        seen.add(marker)
        assert story.text.count(marker) == 2
        texts = {s.index: s.text for s in story.sections}
        assert record["earlier"] in texts[record["earlier_chapter"]]
        assert record["later"] in texts[record["later_chapter"]]
        assert record["later_chapter"] >= 5  # inside the window (last 2 of 6 chapters)
        expected = {"adjacent": 4, "midpoint": 2, "opening": 1}[record["depth"]]
        # prefix is chapters 1-4 (1,200 words): its midpoint (600) is the end of chapter 2
        assert record["earlier_chapter"] == expected or (
            record["depth"] == "midpoint" and record["earlier_chapter"] == 3
        )
        if record["depth"] == "adjacent":
            assert texts[4].endswith(record["earlier"])
        if record["depth"] == "opening":
            assert texts[1].split("\n\n")[1] == record["earlier"]  # after the first paragraph
        assert record["distance_words"] > 0
    with RunStore.open(source, readonly=True) as store:
        original = load_story(store).text
        assert store.plans.get(PLAN_KEY) is None and not any(m in original for m in seen)


def test_recall_counts_exact_marker_matches(source, tmp_path):
    copies = make_injected_copies(
        source, tmp_path / "inj", depths=["adjacent", "opening"], controls=1, window_chapters=2
    )
    category_of = {c: cat for cat, _, c_, _ in CONTRADICTIONS for c in [c_]}

    def judge(request):
        user = request.messages[1]["content"]
        found = []
        for earlier, cat in category_of.items():
            pattern = re.escape(earlier).replace(re.escape("{m}"), r"(\w+)")
            m = re.search(pattern, user)
            grammar = {
                "characterization": "CharacterizationReport",
                "factual_detail": "FactualDetailReport",
                "narrative_style": "NarrativeStyleReport",
                "timeline_plot": "TimelinePlotReport",
                "world_building": "WorldBuildingReport",
            }[cat]
            if m and schema_name(request) == grammar and cat != "world_building":  # miss world building
                subtype = next(s for c, s, _, _ in CONTRADICTIONS if c == cat)
                found.append(
                    {
                        "subtype": subtype,
                        "exact_quote": m.group(0),
                        "quote_chapter": 1,
                        "contradicting_quote": m.group(0),
                        "contradicting_chapter": 5,
                        "explanation": f"{m.group(1)} contradicts",
                    }
                )
        return {"contradictions": found}

    llm = judge_llm(judge)
    for copy in copies:
        with RunStore.open(copy) as store:
            judge_consistency(store, load_story(store), Judge(llm, "j"), window_chapters=2)
    table = recall_table(copies)
    assert len(table["controls"]) == 1 and table["controls"][0]["any_hit"] is False
    hits = {key: [r["category_hit"] for r in rows] for key, rows in table["cells"].items()}
    assert hits[("world_building", "adjacent")] == [False]
    assert hits[("factual_detail", "opening")] == [True]
    assert sum(sum(v) for v in hits.values()) == 8  # 4 categories x 2 depths
    text = "\n".join(render_recall(table))
    assert "| world_building | adjacent | 1 |" in text and "0 under any" in text


def test_magnet_story_is_injected_in_its_paragraphs_and_keeps_the_originals(tmp_path):
    """Magnet runs have fixed sections of paragraphs, not chapters: a pair lands in the paragraph
    that holds the spot, and the revised paragraph's earlier text is kept as a version."""
    story = {"title": "T", "premise": "P", "words": 5_000}
    with RunStore.create(tmp_path / "m", pipeline="magnet", unit_kind="step", config={"story": story}) as store:
        step = 0
        for goal in range(1, 13):  # 36 paragraphs: six sections of SECTION_PARAGRAPHS (6)
            for paragraphs in ([words(100, f"g{goal}a")], [words(100, f"g{goal}b"), words(100, f"g{goal}c")]):
                step += 1
                store.commit_step(step, paragraphs, state={}, record={}, goal=f"goal {goal}")
        store.finish()
    copies = make_injected_copies(
        tmp_path / "m", tmp_path / "inj", depths=["adjacent", "opening"], controls=1, window_chapters=2
    )
    assert len(copies) == 5 * 2 + 1
    for copy in copies:
        with RunStore.open(copy, readonly=True) as store:
            record = store.plans.get(PLAN_KEY)
            injected = load_story(store)
            revised = [(p.step, p.seq) for p in store.paragraphs() if record["marker"] in p.text]
            versions = {key: store.paragraph_versions(*key) for key in revised}
        assert len(injected.sections) == 6 and injected.text.count(record["marker"]) == 2
        sections = {s.index: s.text for s in injected.sections}
        assert record["earlier"] in sections[record["earlier_chapter"]]
        assert record["later"] in sections[record["later_chapter"]] and record["later_chapter"] >= 5
        if record["depth"] == "adjacent":
            assert sections[4].endswith(record["earlier"])
        else:  # after the first paragraph of the first section
            assert sections[1].split("\n\n")[1] == record["earlier"]
        assert revised and all(len(v) == 1 and record["marker"] not in v[0]["text"] for v in versions.values())
        assert all(v[0]["replaced_by"] == "eval-inject" for v in versions.values())
