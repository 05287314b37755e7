"""Edges of the core rules that the mutation pass (scripts/mutants.py) found untested."""

from __future__ import annotations

from agent.eval.ced import best_scores, consistency_scores
from agent.eval.consistency import judge_consistency
from agent.eval.judge import Judge
from agent.eval.story import load_story
from agent.eval.windows import choose_window
from agent.store import RunStore
from agent.store import judgments as stored
from tests.eval.helpers import judge_llm, make_run, words
from tests.eval.test_windows import story


def test_a_category_never_judged_leaves_the_story_unscored(tmp_path):
    """A run killed after four of the five category replies: nothing failed, one is missing."""
    run = make_run(tmp_path, "a", [words(1000)], target=1000)
    with RunStore.open(run) as store:
        story_ = load_story(store)
        judge_consistency(store, story_, Judge(judge_llm(lambda r: {"contradictions": []}), "j"), window_chapters=1)
        [row] = [r for r in stored.select(store, "consistency") if r.item == "world_building"]
        with store.db.write() as conn:  # as a kill before the fifth reply would leave it
            conn.execute("DELETE FROM judgments WHERE item = 'world_building'")
        [score] = consistency_scores(store, story_)
        assert score.missing == ["world_building"] and not score.failed
        assert not score.complete and score.metrics() == {}
        assert best_scores(store, story_) == []
        assert row.ok


def test_min_words_stops_at_exactly_enough():
    # the last two chapters give exactly 200 words: two chapters, not three
    w = choose_window(story([100, 100, 100, 100], None), min_words=200)
    assert (w.k, w.first, w.checked_words) == (2, 3, 200)
    w = choose_window(story([100, 100, 100, 100], None), min_words=201)
    assert (w.k, w.first, w.checked_words) == (3, 2, 300)
