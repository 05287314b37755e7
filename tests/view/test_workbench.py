"""The writer's pages of the view (#25): the book with contents and chapter navigation, the outline,
the cast and each character's page, the search (the same hits as ``fabula search``), the live
status of a run being written, the styled 404; every link on them resolves; hostile names stay text."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import urldefrag

import pytest

pytest.importorskip("starlette")
pytest.importorskip("jinja2")
from starlette.testclient import TestClient

from agent.cli import main
from agent.llm.types import CallRecord
from agent.magnet.runner import write_story as write_magnet
from agent.magnet.settings import MagnetSettings
from agent.store import RunStore
from agent.testing.story_llm import StoryLLM, story_dict
from agent.view.app import create_app
from tests.magnet.stories import story

HOSTILE = '<script>alert("x")</script> & Eve'
HOSTILE_RUN = "evil&<run>"
SECRET = "she forged the <codicil>"


@pytest.fixture(scope="module")
def client(runs_dir):
    return TestClient(create_app(runs_dir))


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory) -> Path:
    """A Magnet run whose run name, a character's name and a secret are HTML, and whose cast keeps secrets."""
    folder = tmp_path_factory.mktemp("hostile")
    characters = story_dict()["characters"]
    characters[1] = {**characters[1], "name": HOSTILE, "secrets": {"forged": SECRET}}
    characters[0] = {**characters[0], "relationships": {HOSTILE: "rival"}}
    config = {**MagnetSettings().as_config(), "story": story(words=200, characters=characters).to_dict()}
    store = RunStore.create(
        folder / HOSTILE_RUN, pipeline="magnet", config=config, unit_kind="step", model="story-llm", backend="scripted"
    )
    with store.sessions.hold("start"):
        write_magnet(store, StoryLLM(), config)
    store.close()
    return folder


def pages_of(client: TestClient, run: str) -> list[str]:
    cast = client.get(f"/run/{run}/cast").text
    people = re.findall(r'href="(/run/[^"]+/character\?name=[^"]+)"', cast)
    assert people, "the cast links each character's page"
    return [
        f"/run/{run}/{p}" for p in ("story", "outline", "cast", "search?q=lantern+bell", "state", "costs", "judgments")
    ] + [html.unescape(p) for p in people]


def hrefs(page: str) -> list[str]:
    return [html.unescape(h) for h in re.findall(r'href="([^"]+)"', page)]


@pytest.mark.parametrize("run", ["keeper", "codicil"])
def test_every_page_renders_and_every_link_on_it_resolves(client, run):
    seen: dict[str, str] = {}
    for url in pages_of(client, run):
        response = client.get(url)
        assert response.status_code == 200, url
        seen[url] = response.text
    checked = 0
    for url, page in list(seen.items()):
        for href in hrefs(page):
            target, fragment = urldefrag(href)
            target = target or url
            if not target.startswith("/"):
                continue
            if target not in seen:
                response = client.get(target)
                assert response.status_code == 200, f"{href} on {url}"
                seen[target] = response.text
            if fragment:
                assert f'id="{fragment}"' in seen[target], f"{href} on {url}: no #{fragment} there"
            checked += 1
    assert checked > 40


def test_book_has_contents_chapter_navigation_and_a_reading_measure(client):
    page = client.get("/run/keeper/story").text
    contents = page.split('id="contents"')[1].split("</nav>")[0]
    assert [int(n) for n in re.findall(r'href="#unit-(\d+)"', contents)] == [1, 2, 3]
    chapter2 = page.split('id="unit-2"')[1].split("</article>")[0]
    assert 'class="prev" href="#unit-1"' in chapter2 and 'class="next" href="#unit-3"' in chapter2
    css = client.get("/static/style.css").text
    measure = re.search(r"\.book \{[^}]*max-width: (\d+)ch", css)
    assert measure and 55 <= int(measure.group(1)) <= 70


def test_magnet_book_is_continuous_prose_with_discreet_step_marks(client):
    page = client.get("/run/codicil/story").text
    assert "<h2>Step" not in page and page.count('<article class="prose"') == 1
    assert re.search(r'<p class="narration" id="unit-1" data-unit="1"><a class="step-mark" href="#unit-1"', page)


def test_outline_shows_the_prompt_and_each_chapter_against_its_target_and_gate(client):
    page = client.get("/run/keeper/outline").text
    assert "A lighthouse keeper finds a bell." in page
    rows = {int(n): row for n, row in re.findall(r'<tr data-chapter="(\d+)"(.*?)</tr>', page, flags=re.S)}
    assert sorted(rows) == [1, 2, 3]
    assert "<td>900</td><td>900</td>" in rows[1] and "within the gate" in rows[1]
    assert "<td>900</td><td>40</td>" in rows[2] and "degraded: no draft passed the length gate" in rows[2]
    assert "Find the codicil." in client.get("/run/codicil/outline").text


def test_cast_says_where_each_value_was_set_and_links_its_evidence(client, nst_dir):
    page = client.get("/run/keeper/cast").text
    with RunStore.open(nst_dir, readonly=True) as store:
        state = json.loads(store.query("SELECT state FROM states ORDER BY unit DESC LIMIT 1")[0][0])
    provenance = state["narrative"]["provenance"]["characters"]
    assert len(re.findall(r'<article class="person"', page)) == len(state["narrative"]["characters"])
    person = page.split('data-name="Character 0"')[1].split("</article>")[0]
    assert provenance["Character 0"]["chapter"] == 2
    location = re.search(r'<tr data-field="location">(.*?)</tr>', person, flags=re.S).group(1)
    assert "the harbour district, pier 2" in location and "chapter 2</a>" in location
    link = html.unescape(re.search(r'href="([^"]+)"', location).group(1))
    assert link.startswith("/run/keeper/story?find=") and link.endswith("#found")
    story = client.get(link).text
    marked = re.search(r'<mark id="found"[^>]*>(.*?)</mark>', story).group(1)
    assert " ".join(marked.split()) == " ".join(provenance["Character 0"]["quote"].split())
    assert 'data-key="ch1_event_0"' in page  # the story's facts, each with its chapter


def test_a_characters_page_shows_its_history(client):
    page = client.get("/run/keeper/character", params={"name": "Character 0"}).text
    history = page.split('class="history"')[1]
    assert re.findall(r'<li data-unit="(\d+)"', history) == ["2"]
    assert "knows what happened in chapter 2" in history and 'class="evidence"' in history
    assert client.get("/run/keeper/character", params={"name": "Nobody"}).status_code == 404
    magnet = client.get("/run/codicil/character", params={"name": "Ann"}).text
    assert 'data-field="acted"' in magnet and re.search(r'<li data-unit="11">', magnet)


@pytest.mark.parametrize("query", ["lantern bell", "harbour", "keeper chapel", "nothing-like-this"])
def test_search_page_gives_the_hits_of_fabula_search(client, nst_dir, capsys, query):
    assert main(["search", str(nst_dir), query, "-k", "5", "--json"]) == 0
    expected = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    page = client.get("/run/keeper/search", params={"q": query, "k": "5"}).text
    got = re.findall(r'<li class="hit" data-chapter="(\d+)" data-position="(\d+)" data-score="([-\d.]+)">', page)
    assert got == [(str(h["chapter"]), str(h["position"]), f"{h['score']:.3f}") for h in expected]
    if not expected:
        assert 'id="no-hits"' in page
    for link in re.findall(r'<li class="hit".*?href="([^"]+)"', page, flags=re.S):
        assert '<mark id="found"' in client.get(html.unescape(link)).text


def test_search_on_a_magnet_run_says_why_not(client):
    page = client.get("/run/codicil/search", params={"q": "rain"}).text
    assert "no chapters to search" in page


def test_hostile_names_stay_text_everywhere(hostile_dir):
    client = TestClient(create_app(hostile_dir))
    runs = client.get("/").text
    assert "<run>" not in runs and html.escape(HOSTILE_RUN) in runs
    run = re.search(r'href="(/run/[^"/]+)/story"', runs).group(1)
    cast = client.get(f"{run}/cast").text
    assert "<script>alert" not in cast and "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; Eve" in cast
    assert "she forged the &lt;codicil&gt;" in cast and 'class="secret"' in cast  # secrets shown, marked
    person = client.get(f"{run}/character", params={"name": HOSTILE})
    assert person.status_code == 200 and "<script>alert" not in person.text
    assert "she forged the &lt;codicil&gt;" in person.text
    for page in ("story", "outline", "state", "search?q=%3Cscript%3E"):
        text = client.get(f"{run}/{page}").text
        assert "<script>alert" not in text, page


def test_a_completed_run_reads_completed_and_a_404_is_a_page(client):
    page = client.get("/run/keeper/story").text
    badge = re.search(r'<span id="live" class="live badge badge-(\w+)"[^>]*>(\w+)</span>', page)
    assert badge.groups() == ("completed", "completed") and ">live<" not in page
    assert client.get("/api/version?run=keeper").json()["word"] == "completed"
    missing = client.get("/run/keeper/nothing-here")
    assert missing.status_code == 404 and "<h1>Not found" in missing.text and 'href="/static/style.css"' in missing.text
    assert "nothing-here" in missing.text


def test_a_run_being_written_shows_what_it_is_doing(tmp_path):
    store = RunStore.create(
        tmp_path / "live", pipeline="nst", config={"words": 3000, "prompt": "A bell."}, model="m", backend="scripted"
    )
    with store.sessions.hold("start"):
        store.set_target(3)
        store.commit_chapter(1, "One", "The bell rang once. " * 50, state={})
        for n in range(2):
            store.ledger.record_llm_call(
                CallRecord("nst_prose", "scripted", "m", 0.7, 100, None, 50, 0, 200, 4.0, "stop")
            )
            store.ledger.record_tool_call(turn=n + 1, tool="write", arguments={}, result="REJECTED")
        client = TestClient(create_app(tmp_path))
        page = client.get("/run/live/story").text
        runs = client.get("/").text
        version = client.get("/api/version?run=live").json()
    store.close()
    assert re.search(r"badge-writing\"[^>]*>writing</span>", page), page[:1500]
    activity = re.search(r'<p class="activity" id="activity">(.*?)</p>', page, flags=re.S).group(1)
    text = " ".join(re.sub(r"<[^>]+>", "", activity).split())
    assert text.startswith("Now: chapter 2 of 3, writing, draft 2 · 200 of 3000 words · 50.0 tokens/s · ETA "), text
    assert version["word"] == "writing"
    assert "writing" in runs and "chapter 2: writing" in runs


FIRST = "1-story-1-a-bell-rings-at-sea"
"""The folder of the batch's first story: its prompt id and first words (#36)."""


@pytest.fixture(scope="module")
def batch_dir(tmp_path_factory) -> Path:
    """A folder holding a batch of four short stories: one done, one running, one failed, one pending."""
    from tests.view.runs import batch_folder

    folder = tmp_path_factory.mktemp("batches")
    batch_folder(folder)
    (folder / "not-a-run").mkdir()  # an ordinary folder beside the batch: listed as nothing
    return folder


def test_a_batch_folder_is_listed_as_a_batch_in_the_view(batch_dir):
    client = TestClient(create_app(batch_dir))
    page = client.get("/").text
    section = page.split('data-batch="night"')[1].split("</section>")[0]
    counts = dict(re.findall(r'data-status="(\w+)">(\d+) ', section))
    assert counts == {"completed": "1", "running": "1", "failed": "1", "pending": "1", "stopped": "0"}
    assert "&lt;b&gt;the server went away&lt;/b&gt;" in section and "<b>the server" not in section
    links = re.findall(r'href="(/run/night/[^"/]+/story)"', section)
    assert links == [f"/run/night/{k}-story-{k}-a-bell-rings-at-sea/story" for k in ("1", "2", "3", "4")]
    assert ">1: Story 1: a bell rings at sea.</a>" in section  # named by its title or prompt, not "1" alone (#36)
    for link in links:
        response = client.get(link)
        assert response.status_code == 200 and "Story" in response.text, link
    from agent.store.readonly import RunIndex

    index = RunIndex(batch_dir)
    assert index.path(f"night/{FIRST}") == batch_dir / "night" / FIRST
    assert index.path(f"night/../night/{FIRST}") is None
    assert index.path("night/..") is None and index.path("night/") is None
    assert client.get("/run/night/9/story").status_code == 404
    inner = TestClient(create_app(batch_dir / "night")).get("/").text  # the batch folder itself
    assert 'data-batch="night"' in inner and f'href="/run/{FIRST}/story"' in inner


def test_fabula_runs_lists_a_batch_as_a_batch(batch_dir, capsys):
    assert main(["runs", str(batch_dir)]) == 0
    out = capsys.readouterr().out
    assert f"batch {batch_dir / 'night'}  direct  1 completed, 1 running, 1 failed, 1 pending, 0 stopped" in out
    assert re.search(r"night/3-story-3-a-bell-rings-at-sea\s+failed .*the server went away", out)
    assert main(["runs", str(batch_dir), "--json"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["kind"] == "batch" and row["counts"]["pending"] == 1 and len(row["stories"]) == 4
    assert row["words"] == sum(s["words"] for s in row["stories"]) > 0


def test_a_failure_of_the_view_is_a_styled_error_page(runs_dir, monkeypatch):
    """A bug in a page is the view's own error page (500), not a bare text response."""
    from agent.view import pages

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in a page")

    monkeypatch.setattr(pages, "page", broken)
    failed = TestClient(create_app(runs_dir), raise_server_exceptions=False).get("/run/keeper/story")
    assert failed.status_code == 500 and "<h1>Error" in failed.text and 'href="/static/style.css"' in failed.text
    assert "a bug in a page" not in failed.text  # what failed inside stays in the log, not on the page
