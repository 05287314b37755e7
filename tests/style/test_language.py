"""The story's language, detected without a model; ``--language`` overrides; English adds nothing."""

from __future__ import annotations

import pytest

from agent.language import code, detect, instruction, resolve, run_language_code


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("晋太元中，武陵人捕鱼为业。缘溪行，忘路之远近。", "Chinese"),
        ("吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。", "Japanese"),
        ("Il était une fois une princesse qui vivait dans un château sur la mer.", "French"),
        ("Es war einmal ein Müller, der war arm, aber er hatte eine schöne Tochter.", "German"),
        ("Write a tragic love story about a lord's daughter falling in love with a servant.", "English"),
        ("Все счастливые семьи похожи друг на друга.", "Russian"),
        ("", "English"),
        ("Write about Don Juan y la Luna racing at Le Mans", "English"),
    ],
)
def test_the_prompts_language_is_detected_by_script_then_by_common_words(text, language):
    assert detect(text) == language


def test_a_given_language_overrides_the_prompts_and_codes_are_names():
    assert resolve("A story in English.", "zh") == "Chinese"
    assert resolve("晋太元中", "french") == "French"
    assert code("Chinese") == "zh" and code("Klingon") == "en"
    assert run_language_code({"prompt": "晋太元中，武陵人捕鱼为业。"}) == "zh"
    assert run_language_code({}) == "en"


def test_english_adds_no_line_and_any_other_language_one():
    assert instruction("English") == ""
    assert "write everything in Chinese" in instruction("Chinese")
