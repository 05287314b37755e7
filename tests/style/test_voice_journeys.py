"""A writer's road with their own voice and world, through the CLI on the scripted author:
``fabula write nst --style`` (card and exemplars in every writer prompt), ``--bible`` (seeded state,
the planner saw it, a contradicting update refused), and a Chinese prompt written, counted, searched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main
from agent.store import RunStore
from agent.testing.author import Author, default_policy, gate_of
from tests.nst.queued import QueuedModels

FIXTURES = Path(__file__).parent.parent / "fixtures" / "style"
BIBLE = """# Characters
## Wenna Harrow
The lighthouse keeper's daughter, nineteen. Facts: left-handed; born on Skerra Island.
# Places
## Skerra Island
A tidal island reached by a causeway at low water.
# Rules
- The light must be lit before the last ferry.
# Timeline
- Ten years ago the old keeper drowned on the causeway.
# Must happen
- Wenna learns who moved the tide tables.
"""


@pytest.fixture
def models(monkeypatch, tmp_path):
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    return QueuedModels(monkeypatch)


def _write(tmp_path: Path, *extra: str, prompt: str = "A bell keeper hears the drowned ships.") -> int:
    return main(
        [
            "write",
            "nst",
            "--prompt",
            prompt,
            "--words",
            "1000",
            "--out",
            str(tmp_path / "run"),
            "--quiet",
            "--endpoint",
            "http://127.0.0.1:9/v1",
            *extra,
        ]
    )


def test_every_writer_prompt_carries_the_style_card_and_exemplars(tmp_path, models, capsys):
    code = _write(tmp_path, "--style", str(FIXTURES / "austen_sample.txt"))
    assert code == 0, capsys.readouterr().err
    author = models.opened[0]
    openings = [
        r.messages[1]["content"]
        for r in author.requests
        if r.role not in ("plan_outline",)
        and not (r.role or "").startswith("plan_")
        and len(r.messages) > 1
        and r.messages[1]["content"].startswith("# Story prompt")
    ]
    assert openings
    for opening in openings:
        assert "# Style (write in the voice" in opening and "Sentences:" in opening
        assert "Example passage 1" in opening
        assert "Measured, ironic narration" in opening  # the model-written line of the card
    describing = [r for r in author.requests if r.role == "style_description"]
    assert len(describing) == 1 and describing[0].constraint is not None
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        assert store.plans.get("style")["source"] == "austen_sample.txt"
    capsys.readouterr()
    assert main(["show", str(tmp_path / "run")]) == 0
    shown = capsys.readouterr().out
    assert "style     sample austen_sample.txt" in shown and "chapter 2:" in shown
    assert "DRIFT" in shown  # the scripted author's word salad is far from Austen
    assert main(["eval", "metrics", str(tmp_path / "run"), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from agent.view.app import create_app

    page = TestClient(create_app(tmp_path)).get("/run/run/story").text
    assert 'id="style-distance"' in page and 'class="drift"' in page
    assert 'class="style-card"' in page and "Measured, ironic narration" in page
    assert metrics["style_drifted_chapters"] == 2 and len(metrics["style_distances"]) == 2
    assert metrics["style_distance_max"] > 1.3


def test_a_style_sample_too_short_is_refused_in_one_line_and_nothing_is_created(tmp_path, models, capsys):
    short = tmp_path / "short.txt"
    short.write_text("Only a few words of prose.\n", encoding="utf-8")
    assert _write(tmp_path, "--style", str(short)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--style" in err[0] and "at least" in err[0]
    assert not (tmp_path / "run").exists()


def _canon_breaking(request, tools):
    """The default author, except that its update says Wenna is right-handed (against the bible)."""
    reply = default_policy(request, tools)
    data = json.loads(reply)
    if data.get("tool") == "update":
        snap = {
            "name": "Wenna Harrow",
            "location": "the lighthouse",
            "goal": "",
            "relationships": "",
            "knowledge": "",
            "possessions": "",
            "condition": "",
            "facts": [{"key": "left_handed", "value": "right-handed"}],
        }
        if data.get("upsert_character_state"):
            snap["evidence"] = data["upsert_character_state"][0].get("evidence")
        elif data.get("add_past_event"):
            snap["evidence"] = data["add_past_event"][0].get("evidence")
        data["upsert_character_state"] = [snap, *data.get("upsert_character_state", [])]
        return json.dumps(data)
    return reply


def test_a_bible_seeds_the_state_reaches_the_planner_and_holds_its_canon(tmp_path, models, capsys):
    bible = tmp_path / "bible.md"
    bible.write_text(BIBLE, encoding="utf-8")
    models.queue.append(Author(policy=_canon_breaking))
    code = _write(tmp_path, "--bible", str(bible))
    assert code == 0, capsys.readouterr().err
    author = models.opened[0]
    planner = [r for r in author.requests if (r.role or "").startswith("plan_")]
    assert planner and all("Wenna Harrow" in r.messages[1]["content"] for r in planner)
    assert any("Must happen (wenna_learns_who_moved_the_tide)" in r.messages[1]["content"] for r in planner)
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        initial = store.state(0)["narrative"]
        assert initial["characters"]["Wenna Harrow"]["facts"]["left_handed"] == "left-handed"
        assert "wenna_learns_who_moved_the_tide" in initial["future_requirements"]
        assert "ten_years_ago_the_old_keeper" in initial["past_events"]
        after = store.state(1)["narrative"]
        assert after["characters"]["Wenna Harrow"]["facts"]["left_handed"] == "left-handed"
    told = [m["content"] for r in author.requests for m in r.messages if "canon" in m["content"]]
    assert any("contradicts the canon fact left_handed: 'left-handed'" in m for m in told)


ANALECTS = (
    "学而时习之，不亦说乎？有朋自远方来，不亦乐乎？人不知而不愠，不亦君子乎？"
    "吾日三省吾身：为人谋而不忠乎？与朋友交而不信乎？传不习乎？"
    "温故而知新，可以为师矣。知之为知之，不知为不知，是知也。"
)
"""Public-domain Chinese prose (the Analects), the scripted author's Chinese chapters are cut from."""


class ChineseAuthor(Author):
    """The scripted author writing its chapters in Chinese (each character one word, as fabula counts)."""

    def reply(self, request):
        if request.role == "nst_prose":
            size = gate_of(request)[0]
            text = ANALECTS * (size // len(ANALECTS) + 2)
            cjk = 0
            for end, char in enumerate(text):
                cjk += "\u4e00" <= char <= "\u9fff"
                if cjk >= size:
                    return text[: end + 1] + "。", "stop"
        return super().reply(request)


def test_a_chinese_prompt_is_written_in_chinese_counted_by_characters_and_searched(tmp_path, models, capsys):
    prompt = "一个灯塔看守人的女儿发现潮汐表被人动了手脚，她必须在最后一班渡船之前找出真相。"
    models.queue.append(ChineseAuthor())
    code = _write(tmp_path, prompt=prompt)
    assert code == 0, capsys.readouterr().err
    author = models.opened[0]
    assert any("write everything in Chinese" in m["content"] for r in author.requests for m in r.messages)
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        chapter = store.chapter(1)
        assert chapter.words == sum("\u4e00" <= c <= "\u9fff" for c in chapter.text) > 300
    capsys.readouterr()
    assert main(["search", str(tmp_path / "run"), "温故而知新", "--json"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert hits and "温故而知新" in hits[0]["text"]
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from agent.view.app import create_app

    page = TestClient(create_app(tmp_path)).get("/run/run/story").text
    assert '<html lang="zh">' in page and "温故而知新" in page
    assert main(["export", str(tmp_path / "run"), "--format", "html", "-o", str(tmp_path / "book.html")]) == 0
    assert '<html lang="zh">' in (tmp_path / "book.html").read_text(encoding="utf-8")


def test_in_a_small_context_the_exemplars_give_way_before_the_card_and_the_outline(tmp_path, models, capsys):
    code = _write(tmp_path, "--style", str(FIXTURES / "austen_sample.txt"), "--context-tokens", "4500")
    assert code == 0, capsys.readouterr().err
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        steps = [t.arguments["action"] for t in store.ledger.tool_calls() if t.tool == "budget"]
    assert steps.count("drop_style_exemplars") == 2 and "abridge_outline" not in steps
    openings = [
        r.messages[1]["content"]
        for r in models.opened[0].requests
        if len(r.messages) > 1 and r.messages[1]["content"].startswith("# Story prompt")
    ]
    assert openings and all("Sentences:" in o and "Example passage" not in o for o in openings)


def _openings(model) -> list[str]:
    return [
        r.messages[1]["content"]
        for r in model.requests
        if len(r.messages) > 1 and r.messages[1]["content"].startswith("# Story prompt")
    ]


def test_continue_with_style_and_a_sequel_of_a_styled_book_write_in_the_samples_voice(tmp_path, models, capsys):
    assert _write(tmp_path) == 0
    assert (
        main(
            [
                "continue",
                str(tmp_path / "run"),
                "--words",
                "1000",
                "--quiet",
                "--style",
                str(FIXTURES / "doyle_sample.txt"),
            ]
        )
        == 0
    ), capsys.readouterr().err
    continued = _openings(models.opened[-1])
    assert continued and all("# Style (write in the voice" in o for o in continued)
    assert main(["sequel", str(tmp_path / "run"), "--out", str(tmp_path / "two"), "--words", "1000", "--quiet"]) == 0, (
        capsys.readouterr().err
    )
    sequel = _openings(models.opened[-1])
    assert sequel and all("# Style (write in the voice" in o for o in sequel)
    with RunStore.open(tmp_path / "two", readonly=True) as store:
        assert store.plans.get("style")["source"] == "doyle_sample.txt"


@pytest.mark.parametrize(("writer", "role"), [("rollsum", "rollsum_chapter"), ("direct", "direct_story")])
def test_the_baselines_writer_prompts_carry_the_bible_and_the_style(tmp_path, models, capsys, writer, role):
    bible = tmp_path / "bible.md"
    bible.write_text(BIBLE, encoding="utf-8")
    code = main(
        [
            "write",
            writer,
            "--prompt",
            "A bell keeper hears the drowned ships.",
            "--words",
            "1000",
            "--out",
            str(tmp_path / "run"),
            "--quiet",
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--style",
            str(FIXTURES / "austen_sample.txt"),
            "--bible",
            str(bible),
        ]
    )
    assert code == 0, capsys.readouterr().err
    drafts = [r.messages[1]["content"] for r in models.opened[0].requests if r.role == role]
    assert drafts and all(
        "# Story bible" in d
        and "left_handed: left-handed" in d
        and "# Style (write in the voice" in d
        and "Example passage 1" in d
        and "Measured, ironic narration" in d
        for d in drafts
    )


def test_a_books_state_exports_as_a_bible_that_reads_back_and_starts_the_next_book(tmp_path, models, capsys):
    from agent.bible.read import read_bible

    bible = tmp_path / "bible.md"
    bible.write_text(BIBLE, encoding="utf-8")
    assert _write(tmp_path, "--bible", str(bible)) == 0
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        final = store.state(store.info().last_unit)["narrative"]
    for name in ("next.toml", "next.md"):
        assert main(["bible", "export", str(tmp_path / "run"), "-o", str(tmp_path / name)]) == 0
        exported = read_bible(tmp_path / name)
        assert {c["name"] for c in exported["characters"]} == set(final["characters"])
        assert exported["places"][0]["name"] == "Skerra Island" and exported["rules"]
        wenna = next(c for c in exported["characters"] if c["name"] == "Wenna Harrow")
        assert wenna["facts"]["left_handed"] == "left-handed"
    toml = read_bible(tmp_path / "next.toml")
    assert {r["key"] for r in toml["must_happen"]} == set(final["future_requirements"])
    assert {e["key"] for e in toml["timeline"]} == set(final["past_events"])
    capsys.readouterr()
    assert (
        main(
            [
                "write",
                "nst",
                "--prompt",
                "Book two.",
                "--words",
                "1000",
                "--out",
                str(tmp_path / "two"),
                "--quiet",
                "--endpoint",
                "http://127.0.0.1:9/v1",
                "--bible",
                str(tmp_path / "next.toml"),
            ]
        )
        == 0
    )
    with RunStore.open(tmp_path / "two", readonly=True) as store:
        assert set(store.state(0)["narrative"]["future_requirements"]) == set(final["future_requirements"])


def test_bible_export_of_a_run_without_a_state_is_one_line(tmp_path, models, capsys):
    assert (
        main(
            [
                "write",
                "direct",
                "--prompt",
                "A bell.",
                "--words",
                "1000",
                "--out",
                str(tmp_path / "run"),
                "--quiet",
                "--endpoint",
                "http://127.0.0.1:9/v1",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["bible", "export", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "direct run" in err[0]


def test_language_overrides_the_prompts_for_the_planner_and_the_writer(tmp_path, models, capsys):
    assert _write(tmp_path, "--language", "fr") == 0, capsys.readouterr().err
    requests = models.opened[0].requests
    planner = [r for r in requests if (r.role or "").startswith("plan_")]
    writer = _openings(models.opened[0])
    assert planner and all("write everything in French" in r.messages[1]["content"] for r in planner)
    assert writer and all("write everything in French" in o for o in writer)
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        assert store.info().config["language"] == "fr"


def test_a_chinese_book_goes_on_in_chinese_even_from_an_english_premise(tmp_path, models, capsys):
    models.queue += [ChineseAuthor(), ChineseAuthor()]
    assert _write(tmp_path, prompt="一个灯塔看守人的女儿发现潮汐表被人动了手脚。") == 0, capsys.readouterr().err
    assert (
        main(
            [
                "continue",
                str(tmp_path / "run"),
                "--words",
                "1000",
                "--quiet",
                "--premise",
                "The keeper's daughter sails to the mainland.",
            ]
        )
        == 0
    ), capsys.readouterr().err
    planned = [r.messages[-1]["content"] for r in models.opened[-1].requests if r.role == "plan_outline"]
    assert planned and "write everything in Chinese" in planned[0]
