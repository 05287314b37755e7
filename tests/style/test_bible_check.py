"""``fabula bible check`` and ``--bible``: the issue's Markdown accepted as written; bad bibles refused,
one line per problem with its line number, nothing created."""

from __future__ import annotations

import pytest

from agent.bible.read import read_bible
from agent.cli import main
from tests.style.test_voice_journeys import BIBLE


def test_the_issues_markdown_bible_is_accepted_as_written(tmp_path, capsys):
    path = tmp_path / "bible.md"
    path.write_text(BIBLE.replace("# Characters", "# CHARACTERS"), encoding="utf-8")
    assert main(["bible", "check", str(path)]) == 0
    assert "1 characters, 1 places, 1 rules, 1 timeline, 1 must happen" in capsys.readouterr().out
    bible = read_bible(path)
    assert bible["characters"][0]["facts"] == {
        "left_handed": "left-handed",
        "born_on_skerra_island": "born on Skerra Island",
    }


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "twice.md",
            BIBLE + "# Characters\n## wenna harrow\nAgain.\n",
            ":14: the character 'wenna harrow' appears twice",
        ),
        ("nokey.toml", '[[must_happen]]\ndescription = "Wenna learns the truth"\n', ": a requirement has no key"),
        (
            "date.yaml",
            "timeline:\n  - key: flood\n    event: The causeway flooded.\n    date: 1890-13-45\n",
            ":2: the date '1890-13-45' of 'flood' is not a date",
        ),
    ],
)
def test_a_bad_bible_is_refused_naming_the_problem_and_its_line(tmp_path, capsys, name, text, message):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    assert main(["bible", "check", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_a_huge_or_binary_bible_is_refused_in_one_line_and_no_run_is_created(tmp_path, capsys):
    huge = tmp_path / "huge.md"
    huge.write_bytes(b"# Rules\n" + b"- rule\n" * (10 * (1 << 20) // 7))
    binary = tmp_path / "bible.toml"
    binary.write_bytes(b"\x00\x01\x02PK\x03\x04" * 100)
    for path, message in ((huge, "larger than 1 MiB"), (binary, "binary file")):
        out = tmp_path / "run"
        code = main(
            [
                "write",
                "nst",
                "--prompt",
                "a story",
                "--words",
                "1000",
                "--bible",
                str(path),
                "--out",
                str(out),
                "--quiet",
                "--endpoint",
                "http://127.0.0.1:9/v1",
            ]
        )
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and message in err[0], err
        assert not out.exists()


def test_the_exported_schema_is_the_bibles_and_every_read_bible_fits_it(tmp_path):
    import json
    from pathlib import Path

    import jsonschema

    from agent.bible.schema import bible_schema

    exported = Path(__file__).resolve().parents[2] / "docs" / "story-bible.schema.json"
    assert json.loads(exported.read_text(encoding="utf-8")) == bible_schema(), (
        "run fabula bible schema > docs/story-bible.schema.json"
    )
    path = tmp_path / "bible.md"
    path.write_text(BIBLE, encoding="utf-8")
    jsonschema.validate(read_bible(path), bible_schema())


def test_a_toml_and_a_yaml_bible_read_to_the_same_shape(tmp_path):
    toml = tmp_path / "b.toml"
    toml.write_text(
        '[[characters]]\nname = "Wenna Harrow"\ndescription = "The keeper\'s daughter."\n'
        '[characters.facts]\nhandedness = "left"\n\n[[must_happen]]\nkey = "tide_tables"\n'
        'description = "Wenna learns who moved the tide tables."\n',
        encoding="utf-8",
    )
    yaml = tmp_path / "b.yaml"
    yaml.write_text(
        "characters:\n  - name: Wenna Harrow\n    description: The keeper's daughter.\n"
        "    facts: {handedness: left}\nmust_happen:\n  - key: tide_tables\n"
        "    description: Wenna learns who moved the tide tables.\n",
        encoding="utf-8",
    )
    assert read_bible(toml) == read_bible(yaml)
    assert read_bible(toml)["characters"][0]["facts"] == {"handedness": "left"}


def test_a_bible_becomes_a_magnet_story_definition_that_magnet_accepts(tmp_path, capsys):
    from agent.magnet.definition import load_definition

    path = tmp_path / "bible.md"
    path.write_text(BIBLE, encoding="utf-8")
    out = tmp_path / "story.toml"
    assert (
        main(["story", "from-bible", str(path), "-o", str(out), "--title", "The Tide Tables", "--genre", "mystery"])
        == 0
    )
    assert "marked (edit)" in capsys.readouterr().out
    story = load_definition(out)
    wenna = story.character("Wenna Harrow")
    assert wenna.goals == ["Wenna learns who moved the tide tables."]
    assert wenna.state["left_handed"] == "left-handed" and wenna.location == "Skerra Island"
    assert story.world["rule_1"] == "The light must be lit before the last ferry."
    assert main(["story", "check", str(out)]) == 0


def test_every_problem_of_a_bible_is_named_with_its_line(tmp_path, capsys):
    path = tmp_path / "bad.md"
    path.write_text(
        "# Characters\n## Ann\nA.\n## ann\nB.\n# Timeline\n- 1890-13-01: a flood\n# Weather\n", encoding="utf-8"
    )
    assert main(["bible", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: 3 problems" in err
    assert f"{path}:4: the character 'ann' appears twice (first at line 2)" in err
    assert f"{path}:7: the date '1890-13-01' of 'a_flood' is not a date" in err
    assert f"{path}:8: unknown section 'Weather'" in err
