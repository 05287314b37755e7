"""``fabula lint`` on a book written in Chinese: each character is a word (as fabula counts), a repeated
clause and a run of sentences opening alike are flagged, and human prose that repeats nothing is not."""

from __future__ import annotations

from agent.lint import lint_book
from agent.text import count_words

ANALECTS = [  # public-domain prose (the Analects): three passages that repeat no clause
    "学而时习之，不亦说乎？有朋自远方来，不亦乐乎？人不知而不愠，不亦君子乎？"
    "吾日三省吾身：为人谋而不忠乎？与朋友交而不信乎？传不习乎？",
    "巧言令色，鲜矣仁。弟子入则孝，出则弟，谨而信，泛爱众，而亲仁。行有余力，则以学文。"
    "温故而知新，可以为师矣。知之为知之，不知为不知，是知也。",
    "为政以德，譬如北辰，居其所而众星共之。吾十有五而志于学，三十而立，四十而不惑，五十而知天命，"
    "六十而耳顺，七十而从心所欲，不逾矩。",
]
CLAUSE = "灯笼的光在古老磨坊冰冷的石墙上摇曳"
"""A clause of machine prose, repeated in every chapter of the book below."""


def test_a_clause_repeated_across_chinese_chapters_is_flagged_and_counted_per_character():
    book = [(f"第{i}章", f"{passage}{CLAUSE}。") for i, passage in enumerate(ANALECTS, start=1)]
    book += [("第四章", f"夜深了。{CLAUSE}。风停了。"), ("第五章", f"她醒来。{CLAUSE}。")]
    report = lint_book(book)
    repeated = [f for f in report.flags if f.rule == "repeated-phrase"]
    assert len(repeated) == 5 and all(CLAUSE in f.passage for f in repeated)
    assert report.words == sum(count_words(text) for _, text in book)


def test_chinese_sentences_opening_alike_are_flagged():
    text = "他说天要下雨了。他说路很远。他说马累了。他说我们回去吧。她没有回答。"
    flags = [f for f in lint_book([("第一章", text)]).flags if f.rule == "same-opening"]
    assert len(flags) == 1 and "'他说'" in flags[0].detail


def test_human_chinese_prose_that_repeats_nothing_lints_clean():
    report = lint_book([(f"第{i}章", text) for i, text in enumerate(ANALECTS, start=1)])
    assert report.flags == [] and report.words == sum(count_words(t) for t in ANALECTS)
