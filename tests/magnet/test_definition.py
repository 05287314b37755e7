"""Story definitions: the five examples load, and every bad definition is one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.magnet.definition import DefinitionError, load_definition, parse_definition
from agent.testing.story_llm import story_dict

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
    path.write_text(
        'title = "T"\ngenre = "g"\ngoal = "x"\npages = 3\npage_words = 300\n'
        '[[characters]]\nname = "A"\nrole = "r"\ndescription = "d"\npersonality = "p"\n'
        'goals = "g"\nlocation = "l"\n'
    )
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


def _problems(data) -> list[str]:
    with pytest.raises(DefinitionError) as info:
        parse_definition(data, "s.toml")
    lines = str(info.value).splitlines()
    assert all(line.startswith("s.toml: ") for line in lines)
    return lines


def test_every_problem_is_reported_one_line_each_naming_field_and_character():
    data = story_dict(
        world={"codicil_missing": True, "Bad-Name": 1, "ann_secret_plan": "x"}, secrets={"codicil_missing": False}
    )
    chars = data["characters"]
    chars[0]["goals"] = []
    chars[0]["state"] = {"holdingBack": True, "mood": "calm"}
    chars[0]["secrets"] = {"mood": "afraid", "location": "x"}
    chars[2]["name"] = "ANN!"  # reduces to the slug of "Ann"
    chars[2]["relationships"] = {}
    lines = _problems(data)
    expected = [
        "world.Bad-Name: variable names are snake_case",
        "secrets.codicil_missing: clashes with the public world variable",
        "characters[0].goals: is empty (give at least one goal) (character Ann)",
        "characters[0].state.holdingBack: variable names are snake_case",
        "characters[0].secrets.location: clashes with a public variable of the same name (character Ann)",
        "characters[0].secrets.mood: clashes with a public variable of the same name (character Ann)",
        "characters[2].name: 'ANN!' reduces to the same name 'ann' as 'Ann' (characters[0])",
        "world.ann_secret_plan: clashes with Ann's variables",
    ]
    for fragment in expected:
        assert sum(fragment in line for line in lines) == 1, (fragment, lines)
    assert len(lines) == len(expected)


def test_at_most_ten_problems_are_listed():
    data = story_dict(world={f"Bad{i}": 1 for i in range(14)})
    lines = _problems(data)
    assert len(lines) == 11 and lines[-1] == "s.toml: ... and 4 more problem(s)"


def test_writer_control_is_validated():
    lines = _problems(story_dict(pov="second", tense="future", chapter_every=0))
    assert any("pov: must be one of first, third-limited, third-omniscient" in ln for ln in lines)
    assert any("tense: must be one of past, present" in ln for ln in lines)
    assert any("chapter_every: must be a positive whole number" in ln for ln in lines)
    assert any("focal: unknown character 'Zed'" in ln for ln in _problems(story_dict(pov="first", focal="Zed")))
    assert any("focal: missing" in ln for ln in _problems(story_dict(pov="third-limited")))
    s = parse_definition(
        story_dict(
            pov="first",
            focal="Ann",
            tense="present",
            style="terse",
            beats=["a", "b"],
            ending="Ann inherits.",
            chapter_every="goal",
        ),
        "s.toml",
    )
    assert (s.pov, s.focal, s.tense, s.beats, s.chapter_every) == ("first", "Ann", "present", ["a", "b"], "goal")


def test_secrets_load_from_an_inline_table_or_a_sub_table(tmp_path):
    head = 'title = "T"\ngenre = "g"\ngoal = "x"\nwords = 300\n[secrets]\ntrue_heir = "Bo"\n'
    char = '[[characters]]\nname = "A"\nrole = "r"\ndescription = "d"\npersonality = "p"\ngoals = "g"\nlocation = "l"\n'
    inline = tmp_path / "inline.toml"
    inline.write_text(head + char + "secrets = { in_debt = true }\n")
    table = tmp_path / "table.toml"
    table.write_text(head + char + "[characters.secrets]\nin_debt = true\n")
    for path in (inline, table):
        story = load_definition(path)
        assert story.characters[0].secrets == {"in_debt": True} and story.world_secrets == {"true_heir": "Bo"}


def test_the_json_schema_matches_the_format_and_every_example(capsys):
    import json
    import tomllib

    import jsonschema

    from agent.cli import main
    from agent.magnet.definition import CHARACTER_KEYS, STORY_KEYS

    assert main(["story", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert set(schema["properties"]) == STORY_KEYS
    assert set(schema["$defs"]["CharacterFormat"]["properties"]) == CHARACTER_KEYS
    assert set(schema["required"]) == {"title", "genre", "goal", "characters"}
    for path in EXAMPLES:
        jsonschema.validate(tomllib.loads(path.read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**story_dict(), "pov": "second"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**story_dict(), "world": {"Bad-Name": 1}}, schema)


def test_cli_reports_every_problem_on_its_own_line(tmp_path, capsys):
    from agent.cli import main

    path = tmp_path / "bad.toml"
    path.write_text('title = "T"\ngenre = "g"\ngoal = "x"\nwords = 3\ntense = "future"\n[world]\nBad = 1\n')
    assert main(["story", "check", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith(f"fabula: error: {path}: ") for line in err)
