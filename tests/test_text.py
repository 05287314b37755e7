"""The shared word-counting rule and sentence splitting."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent.text import count_words, sentence_spans, split_sentences


def test_counts_latin_words_by_the_ascii_rule():
    assert count_words("Hello, world!") == 2
    assert count_words("don't stop-gap well_known 42 3.5") == 6  # 3.5 is two words
    assert count_words("naïve") == 2  # a non-ASCII letter splits a word (the paper's rule)
    assert count_words("  \n\t ") == 0
    assert count_words("— ... !!") == 0


def test_counts_each_cjk_character_as_a_word():
    assert count_words("你好世界") == 4
    assert count_words("こんにちは") == 5
    assert count_words("カタカナ・テスト") == 7  # the middle dot is punctuation
    assert count_words("안녕하세요") == 5
    assert count_words("他说 hello 世界。") == 5
    assert count_words("“你好！”") == 2


def test_splits_latin_sentences_with_quotes_and_abbreviations():
    text = 'Mr. Smith arrived. "Stop!" she cried. Was it J. R. Hale? It was... Then rain.'
    assert split_sentences(text) == [
        "Mr. Smith arrived.",
        '"Stop!" she cried.',
        "Was it J. R. Hale?",
        "It was...",
        "Then rain.",
    ]


def test_splits_cjk_sentences_and_closing_quotes():
    assert split_sentences("他走了。她说：“你好！”然后离开。真的吗？") == [
        "他走了。",
        "她说：“你好！”",
        "然后离开。",
        "真的吗？",
    ]


def test_line_breaks_end_sentences_and_decimals_do_not():
    assert split_sentences("A heading\n\nThe price was 3.50 today. Next") == [
        "A heading",
        "The price was 3.50 today.",
        "Next",
    ]


@given(st.text())
def test_spans_are_ordered_stripped_and_cover_every_word(text):
    spans = sentence_spans(text)
    last = 0
    for a, b in spans:
        assert last <= a < b <= len(text)
        assert text[a:b] == text[a:b].strip()
        last = b
    # nothing but whitespace lies outside the spans
    outside = "".join(
        text[p:q] for p, q in zip([0] + [b for _, b in spans], [a for a, _ in spans] + [len(text)], strict=True)
    )
    assert outside.strip() == ""
    assert sum(count_words(text[a:b]) for a, b in spans) == count_words(text)
