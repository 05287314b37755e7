"""``fabula lint``: flags machine prose by rule, stays quiet on a human novel, reads runs and files alike."""

from __future__ import annotations

import json
from pathlib import Path

from agent.cli import main
from agent.lint import lint_book, load_rules
from agent.lint.report import MACHINE_FAMILIES
from tests.manuscript.books import moby_dick

ROOT = Path(__file__).resolve().parents[2]

MACHINE = [
    "She let out a breath she didn't know she was holding. The words hung heavy in the air. "
    "Mara looked at the door. Mara looked at the window. Mara looked at the clock. Mara looked at Tomas. "
    '"We should go," she smiled. "Now," he murmured. "Where?" she breathed. "North," he hissed. '
    '"Why?" she murmured. The lantern flickered against the cold stone of the old mill wall.',
    "A wave of relief washed over her. Her heart pounded in her chest as the lantern flickered against the "
    "cold stone of the old mill wall. It was a testament to his patience that he waited.",
    "Tomas couldn't help but smile. The lantern flickered against the cold stone of the old mill wall, "
    "and for what felt like an eternity neither spoke.",
]


def lint_cli(capsys, *args: str) -> tuple[int, str, str]:
    """``fabula lint ARGS`` as the CLI runs it: (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = main(["lint", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_rule_flags_its_own_example():
    rules = load_rules()
    assert len(rules.rules) >= 40
    for rule in rules.rules:
        report = lint_book([("one", rule.example)])
        assert rule.name in {f.rule for f in report.flags}, rule.name


def test_machine_prose_is_flagged_by_rule_with_its_passage():
    report = lint_book([(f"Chapter {i}", t) for i, t in enumerate(MACHINE, 1)])
    rules = {f.rule for f in report.flags}
    assert {
        "breath-held",
        "words-hung",
        "wave-of",
        "heart-pounded",
        "testament",
        "couldnt-help-but",
        "what-felt-like",
    } <= rules
    assert {"same-opening", "nonspeech-tag", "elaborate-tags", "repeated-phrase"} <= rules
    repeat = next(f for f in report.flags if f.rule == "repeated-phrase")
    assert "the lantern flickered against the cold stone" in repeat.detail
    smiled = next(f for f in report.flags if f.rule == "nonspeech-tag")
    assert smiled.passage.startswith('"We should go," she smiled.')
    assert all(c.score > 10 for c in report.chapters)


def test_a_human_novel_raises_almost_no_machine_prose_flags():
    from agent.manuscript.split import split_text

    pieces = split_text(moby_dick(), fmt="text", pattern=None, name="moby").pieces
    report = lint_book([(p.title, p.text) for p in pieces])
    assert report.words > 200_000
    assert report.per_thousand(MACHINE_FAMILIES) < 0.05  # measured 0.014 (scripts/lint_bench.py)
    assert report.score < 0.2


def test_a_writers_rules_file_adds_replaces_and_turns_off_rules(tmp_path):
    own = tmp_path / "mine.toml"
    own.write_text(
        '[[rule]]\nname = "suddenly"\npattern = "\\\\bsuddenly\\\\b"\nexample = "Suddenly, a noise."\n'
        '[[rule]]\nname = "testament"\nenabled = false\n',
        encoding="utf-8",
    )
    rules = load_rules(own)
    names = {r.name for r in rules.rules}
    assert "suddenly" in names and "testament" not in names
    report = lint_book([("one", "Suddenly it was a testament to nothing.")], rules)
    assert [f.rule for f in report.flags] == ["suddenly"]


def test_lint_reads_a_manuscript_file_and_prints_json(tmp_path, capsys):
    book = tmp_path / "book.md"
    book.write_text("".join(f"# Chapter {i}\n\n{t}\n\n" for i, t in enumerate(MACHINE, 1)), encoding="utf-8")
    code, out, err = lint_cli(capsys, str(book), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert len(data["chapters"]) == 3 and data["flags"] == sum(len(c["flags"]) for c in data["chapters"])
    assert data["chapters"][0]["flags"][0]["rule"] == "breath-held"
    _, text, _ = lint_cli(capsys, str(book), "--show", "1")
    assert "[breath-held]" in text and "book: " in text


def test_lint_refuses_bad_input_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\nname = "x"\npattern = "("\n', encoding="utf-8")
    for args, says in (
        ([str(tmp_path / "missing.txt")], "no such run or file"),
        ([str(tmp_path)], "not a run"),
        (["README.md", "--rules", str(bad)], "bad pattern"),
    ):
        code, _, err = lint_cli(capsys, *args)
        assert code == 2 and says in err, err
        assert err.count("\n") == 1
