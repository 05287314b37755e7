"""A big rewrite's word diff reads (#36): the old passage struck through as a whole, then the new one,
with the spaces kept; not old and new words interleaved ("Mark0Short stepsnew chapelchapter")."""

from __future__ import annotations

from agent.store.writer.versions import changed_words, word_diff

OLD = "Mark0 Short steps to the old chapel by the sea. The bell rang at noon."
NEW = "Mark0 A new chapter of the lighthouse began at dawn. The bell rang at noon."


def test_a_rewritten_sentence_is_one_deletion_then_one_insertion():
    diff = word_diff(OLD, NEW)
    assert diff == [
        ("same", "Mark0 "),
        ("del", "Short steps to the old chapel by the sea."),
        ("ins", "A new chapter of the lighthouse began at dawn."),
        ("same", " The bell rang at noon."),
    ]
    assert "".join(t for op, t in diff if op != "del") == NEW  # the new text, exactly
    assert "".join(t for op, t in diff if op != "ins") == OLD
    assert changed_words(diff) == (9, 9)


def test_a_single_changed_word_stays_a_single_change():
    diff = word_diff("The bell rang at noon.", "The bell tolled at noon.")
    assert diff == [("same", "The bell "), ("del", "rang"), ("ins", "tolled"), ("same", " at noon.")]
