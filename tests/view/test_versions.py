"""Versions (#25): every edited chapter or step lists its versions, a word-level diff between any two,
and the later units the edit made stale, in the view and on the CLI (``show --versions``,
``export --version N``)."""

from __future__ import annotations

import json

import pytest

from agent.cli import main
from agent.store import RunStore
from agent.store.writer.versions import AtVersion, step_versions, word_diff
from tests.view.runs import EDITED_WORDS

starlette = pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from agent.view.app import create_app  # noqa: E402


@pytest.fixture(scope="module")
def client(workbench_dir):
    return TestClient(create_app(workbench_dir))


def test_the_versions_page_diffs_the_edited_chapter_and_names_the_stale_ones(client):
    page = client.get("/run/edited/versions").text
    assert '<tr data-unit="3">' in page and page.count("<li>version ") == 3
    diff = page.split('id="diff"')[1].split("</div>")[0]
    assert 'data-a="1" data-b="3"' in diff  # first against current by default
    assert f"<ins>\n\n{EDITED_WORDS.replace('only its rope', 'only its frayed rope')}</ins>" in diff
    assert [int(u) for u in page.split('class="stale-unit" data-unit="')[1:] for u in [u.split('"')[0]]] == [4, 5, 6, 7]
    between = client.get("/run/edited/versions?unit=3&a=2&b=3").text.split('id="diff"')[1].split("</div>")[0]
    assert "<ins> frayed</ins>" in between and "<ins> brass</ins>" in between and "<del>" not in between
    assert (
        "1 word" not in between and "0 words removed, 2 added" in client.get("/run/edited/versions?unit=3&a=2&b=3").text
    )
    story = client.get("/run/edited/story").text
    assert 'href="/run/edited/versions"' in story  # in the run's navigation
    assert 'href="/run/edited/versions?unit=3#diff-heading">revised (version 3)</a>' in story


def test_an_edited_magnet_step_has_versions_too_and_an_unedited_run_says_so(client):
    page = client.get("/run/crowded/versions").text
    assert '<tr data-unit="1">' in page and "<ins> The clock in the gallery stopped.</ins>" in page
    assert "No chapter of this run has been edited" in client.get("/run/summary/versions").text
    assert client.get("/run/edited/versions?unit=99&a=x&b=7").status_code == 200  # nonsense is ignored


def test_word_diff_gives_back_both_texts():
    old, new = "a bell  rang\nat sea tonight", "a brass bell rang\n\nat sea"
    diff = word_diff(old, new)
    assert "".join(t for op, t in diff if op != "del") == new
    assert "".join(t for op, t in diff if op != "ins").split() == old.split()
    assert [d for d in diff if d[0] != "same"] == [("ins", "brass "), ("del", " tonight")]


def test_a_steps_versions_and_the_story_at_version_1(workbench_dir):
    with RunStore.open(workbench_dir / "crowded", readonly=True) as store:
        versions = step_versions(store, 1)
        assert [v.number for v in versions] == [1, 2]
        assert "Paragraph 1. The clock in the gallery stopped.\n\n" in versions[1].text
        assert "clock" not in versions[0].text
        assert "clock" not in AtVersion(store, 1).paragraphs()[0].text
        assert AtVersion(store, 2).paragraphs()[0].text == store.paragraphs()[0].text


def test_show_versions_lists_each_version_and_the_stale_chapters(workbench_dir, capsys):
    run = str(workbench_dir / "edited")
    assert main(["show", run, "--versions"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if " chapter 3  v" in ln]
    assert [ln.split("  v")[1].split()[0] for ln in lines] == ["1", "2", "3"] and "written" in lines[0]
    assert "stale     chapters written before the edit of chapter 3: 4, 5, 6, 7" in out
    assert main(["show", run, "--versions", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["versions"]
    assert [v["version"] for v in found["edited"][0]["versions"]] == [1, 2, 3]
    assert found["stale"]["units"] == [4, 5, 6, 7]


def test_export_version_n_writes_the_story_as_it_was(workbench_dir, capsys):
    run = str(workbench_dir / "edited")
    texts = {}
    for version in (None, 1, 2):
        assert main(["export", run, "--format", "txt", *(["--version", str(version)] if version else [])]) == 0
        texts[version] = capsys.readouterr().out
    assert "frayed" in texts[None] and "rewrote this chapter" in texts[None]
    assert "rewrote this chapter" not in texts[1]
    assert "only its rope" in texts[2] and "frayed" not in texts[2]
    with RunStore.open(workbench_dir / "edited", readonly=True) as store:
        assert store.chapter_versions(3)[0]["text"] in texts[1] and store.chapter(4).text in texts[1]
    assert main(["export", run, "--version", "0"]) == 2
    assert "--version N needs N >= 1" in capsys.readouterr().err
