"""The reference-style search (``search_style="reference"``, the paper profile): tokens, centre weighting,
tie order, the JSON shape, what it sees, hostile queries, CJK, a series; the default style untouched."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.store import RunStore, search_ref
from agent.store.lineage.series import SERIES_KEY, sequel_record, series_search
from agent.store.search_ref import hit_record, result_json, rows, sentences, tokens

from .test_search import FILLER, HOSTILE


def ref(store: RunStore, query: str, **kw):
    return store.search(query, style="reference", **kw)


def test_tokens_are_not_stemmed_and_short_query_tokens_are_dropped():
    assert tokens("The Lanterns were burning; Lila's lantern too.") == [
        "the",
        "lanterns",
        "were",
        "burning",
        "lila",
        "s",
        "lantern",
        "too",
    ]
    # a query keeps tokens of two characters or more, and digits; ``s`` and ``a`` go
    assert tokens("a lantern's glow in 7 rooms", query=True) == ["lantern", "glow", "in", "7", "rooms"]
    assert tokens("a I", query=True) == ["a", "i"]  # unless nothing would be left
    assert tokens("3.5% of C++ and c# café", query=True) == ["3.5%", "of", "c++", "and", "c#", "caf"]
    # CJK: each run's characters and bigrams; a query of several drops the single characters
    assert tokens("灯塔亮了") == ["灯", "塔", "亮", "了", "灯塔", "塔亮", "亮了"]
    assert tokens("灯塔", query=True) == ["灯塔"] and tokens("塔", query=True) == ["塔"]


def test_no_stemming_and_the_dropped_short_word_reach_the_ranking(store, write_chapters):
    write_chapters(store, ["The lanterns burned all night. " + FILLER, "A cat slept. A dog barked. " + FILLER])
    assert ref(store, "lantern") == []  # no Porter stemming: "lantern" is not "lanterns"
    assert store.search("lantern")[0].chapter == 1  # fabula's default stems
    # "a" is dropped from the query, so only the windows with "cat" match
    assert {h.text for h in ref(store, "a cat")} == {"A cat slept.", "A dog barked."}
    assert ref(store, "lanterns")[0].text == "The lanterns burned all night."


def test_the_centre_sentence_stands_three_times_in_its_row():
    (first, second, third) = rows("Alpha begins. Beta has a marigold. Gamma ends.")
    assert second == (
        1,
        "Alpha begins.",
        "Beta has a marigold.",
        "Gamma ends.",
        "beta has a marigold " * 2 + "beta has a marigold alpha begins gamma ends",
    )
    assert first[4].split().count("alpha") == 3 and first[4].split().count("beta") == 1
    assert third[4].endswith("gamma ends beta has a marigold")


def test_the_centre_hit_outranks_its_neighbours(store, write_chapters):
    write_chapters(store, [FILLER * 4, "Alpha begins the day. Beta has a marigold. Gamma ends the day."])
    hits = ref(store, "marigold")
    assert [(h.chapter, h.position) for h in hits] == [(2, 1), (2, 0), (2, 2)]
    assert (hits[0].context, hits[0].text) == (("Alpha begins the day.", "Gamma ends the day."), "Beta has a marigold.")
    # three occurrences against one, under BM25's saturation (k1 = 1.2): well above the neighbours
    assert hits[0].score > 1.3 * hits[1].score


def test_ties_break_toward_later_chapters_then_earlier_sentences(store, write_chapters):
    write_chapters(store, ["The heron waited.", "The heron waited.", "The heron waited. The heron waited."])
    # chapters 1 and 2 score alike (one sentence, the same tokens): the later chapter first
    alike = ref(store, "heron", before=3)
    assert [h.chapter for h in alike] == [2, 1] and alike[0].score == alike[1].score
    # chapter 3's two windows hold the same tokens: the earlier sentence first
    assert [h.position for h in ref(store, "heron", k=8) if h.chapter == 3] == [0, 1]
    # fabula's default breaks the same tie toward the earlier chapter
    assert [h.chapter for h in store.search("heron", before=3)] == [1, 2]


def test_hits_in_the_references_json_shape(store, write_chapters):
    write_chapters(store, ["Ilsa buried the compass. The juniper grew. Night came.", FILLER])
    hit = ref(store, "juniper")[0]
    assert hit_record(hit) == {
        "chapter_id": 1,
        "sentence": "The juniper grew.",
        "before": "Ilsa buried the compass.",
        "after": "Night came.",
    }
    answer = json.loads(result_json("juniper", [hit_record(hit)]))
    assert list(answer) == ["ok", "budget_charged", "query", "hits", "hit_count"]
    assert answer["ok"] and answer["budget_charged"] and answer["hit_count"] == 1
    assert json.loads(result_json("nothing", [])) == {
        "ok": True,
        "budget_charged": True,
        "query": "nothing",
        "hits": [],
        "hit_count": 0,
    }
    assert "灯塔" in result_json("灯塔", [])  # non-ASCII text as it is


def test_only_the_searchable_chapters_are_indexed_and_corrections_are_seen(store, write_chapters):
    write_chapters(store, ["A raven in one.", "A raven in two.", "A raven in three."])
    assert {h.chapter for h in ref(store, "raven")} == {1, 2, 3}
    assert {h.chapter for h in ref(store, "raven", before=3)} == {1, 2}
    assert ref(store, "raven", before=1) == []
    store.correct_chapter(1, "raven", "crow")
    assert {h.chapter for h in ref(store, "raven", before=3)} == {2}
    assert [h.chapter for h in ref(store, "crow")] == [1]


def test_sentences_split_as_the_reference_does():
    text = "First  line.\n\n“Quoted,” she said.   Then spaces. 最后一句。好的！Mr. Smith"
    assert sentences(text) == [
        "First  line.",
        "“Quoted,” she said.",
        "Then spaces.",
        "最后一句。",
        "好的！",
        "Mr.",
        "Smith",
    ]


@pytest.mark.parametrize("query", HOSTILE)
def test_fts_syntax_is_never_interpreted(store, write_chapters, query):
    write_chapters(store, ["The lantern is lit. NEAR the door, AND the col is cold."])
    ref(store, query)  # no exception
    hits = ref(store, f"{query} lantern")
    assert hits and hits[0].text == "The lantern is lit."
    assert all("lantern" in " ".join(map(str, hit_record(h).values())) for h in hits), (query, hits)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=200))
def test_any_query_text_is_safe(store, write_chapters, query):
    if store.next_unit() == 1:
        write_chapters(store, ["The lantern is lit. 灯塔亮了。 NEAR the door, AND col:cold."])
    assert len(ref(store, query)) <= 8


def test_cjk_is_found(store, write_chapters):
    write_chapters(store, ["林晓在海边长大。灯塔在山上。", "渔船回港了。"])
    assert ref(store, "灯塔")[0].text == "灯塔在山上。"
    assert ref(store, "船")[0].chapter == 2


def test_a_series_searches_every_book_in_one_index(tmp_path):
    with RunStore.create(tmp_path / "one", pipeline="nst", config={}) as first:
        first.commit_chapter(1, "One", "The heron waited by the weir.", state={})
        record = sequel_record(first, "Book One")
    with RunStore.create(tmp_path / "two", pipeline="nst", config={}) as second:
        second.plans.put(SERIES_KEY, record)
        second.commit_chapter(1, "Two", "The heron waited by the weir.", state={})
        second.commit_chapter(2, "Three", "Later still.", state={})
        hits = series_search(second, "heron", k=8, before=2, style="reference")
        # one ranking: the same sentence ties, and this book's chapter (the later) comes first
        assert [(h.book, h.chapter) for h in hits] == [(None, 1), (1, 1)]
        assert hit_record(hits[1])["book"] == 1 and "book" not in hit_record(hits[0])
        assert {h.book for h in series_search(second, "heron", k=8, before=2)} == {None, 1}


def test_the_default_style_is_fabulas(store, write_chapters):
    write_chapters(store, ["Alpha begins the day. Beta has a marigold. Gamma ends the day."])
    assert store.search("marigold")[0].text == "Alpha begins the day. Beta has a marigold. Gamma ends the day."
    assert store.search("marigold")[0].context is None
    assert search_ref.THIS_BOOK > 1000
