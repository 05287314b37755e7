"""Story definitions: the five examples load, and every bad definition is one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.magnet.definition import DefinitionError, load_definition, parse_definition
from tests.magnet.story_llm import story_dict

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "agent" / "magnet" / "examples").glob("*.toml"))


def test_five_examples_one_per_genre():
    genres = sorted(load_definition(p).genre for p in EXAMPLES)
    assert genres == ["action", "mystery", "social drama", "thriller", "workplace drama"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_is_complete(path):
    story = load_definition(path)
    assert story.target_words == 20 * 500
    assert len(story.characters) >= 3
    for char in story.characters:
        assert char.relationships and char.abilities and char.goals


def _error(**over) -> str:
    with pytest.raises(DefinitionError) as info:
        parse_definition(story_dict(**over), "s.toml")
    message = str(info.value)
    assert "\n" not in message and message.startswith("s.toml: ")
    return message


def test_no_characters():
    assert "characters: no characters defined" in _error(characters=[])


def test_duplicate_names():
    chars = story_dict()["characters"]
    chars[2]["name"] = "ann"
    assert "characters[2].name: duplicate name 'ann' (also characters[0])" in _error(characters=chars)


def test_relationship_to_unknown_character():
    chars = story_dict()["characters"]
    chars[1]["relationships"] = {"Zed": "brother"}
    assert "characters[1].relationships.Zed: unknown character 'Zed'" in _error(characters=chars)


@pytest.mark.parametrize("field,value", [("words", -5), ("words", 0), ("pages", -1.5)])
def test_negative_length(field, value):
    data = story_dict()
    del data["words"]
    data[field] = value
    with pytest.raises(DefinitionError, match=f"s.toml: {field}: must be positive"):
        parse_definition(data, "s.toml")


def test_unknown_key_is_a_likely_typo():
    assert "s.toml: gaol: unknown key" in _error(gaol="x")
    chars = story_dict()["characters"]
    chars[0]["personalty"] = "x"
    assert "characters[0].personalty: unknown key" in _error(characters=chars)


def test_missing_field_and_both_lengths():
    chars = story_dict()["characters"]
    del chars[1]["location"]
    assert "characters[1].location: missing" in _error(characters=chars)
    assert "pages and words" in _error(pages=3)


def test_pages_use_page_words(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('title = "T"\ngenre = "g"\ngoal = "x"\npages = 3\npage_words = 300\n'
                    '[[characters]]\nname = "A"\nrole = "r"\ndescription = "d"\npersonality = "p"\n'
                    'goals = "g"\nlocation = "l"\n')
    story = load_definition(path)
    assert story.target_words == 900
    assert story.with_length(pages=2).target_words == 600
    assert story.with_length(words=1234).target_words == 1234
    with pytest.raises(DefinitionError, match="words: must be positive"):
        story.with_length(words=-1)


def test_bad_toml_names_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("title = \n")
    with pytest.raises(DefinitionError, match=r"bad.toml: not valid TOML"):
        load_definition(path)
    with pytest.raises(DefinitionError, match="cannot read"):
        load_definition(tmp_path / "missing.toml")
