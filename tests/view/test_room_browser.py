"""The editing room in a real headless Chromium (issue 37): start a book from the form, approve from the page,
revise with a note from the page, and actions refused without the session token or (beyond loopback) the
access token; every page clean under axe-core. The actions run the CLI's own commands against the scripted
author behind a vLLM-shaped server."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("FABULA_CHROMIUM", "/usr/bin/chromium")
if not Path(CHROMIUM).exists():
    pytest.skip(
        f"no Chromium at {CHROMIUM} (scripts/setup installs Debian's chromium package)", allow_module_level=True
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
pytest.importorskip("uvicorn")

from agent.store import RunStore  # noqa: E402
from agent.store.writer.review import actions  # noqa: E402
from agent.testing.author import Author  # noqa: E402
from agent.testing.author_server import AuthorServer  # noqa: E402
from agent.view.room import RoomSettings  # noqa: E402
from tests.view.browser_checks import axe_violations  # noqa: E402
from tests.view.server import serve  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NOTE = "Open with the bell ringing in fog"


@pytest.fixture
def writer(monkeypatch, tmp_path):
    """The scripted author as the model every action's command uses (FABULA_ENDPOINT), its code this checkout."""
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    with AuthorServer(Author(), vllm=True) as server:
        monkeypatch.setenv("FABULA_ENDPOINT", server.url)
        yield server


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert not errors, f"script errors on the page: {errors}"


def finished(page) -> None:
    """Wait until the action the page follows has finished and the page has reloaded with its result."""
    try:
        page.wait_for_url(re.compile(r".*done=.*"), timeout=60_000)
    except sync_api.TimeoutError:
        raise AssertionError(f"the action did not finish: {page.url} {page.inner_text('body')[:1500]}") from None
    assert "finished (exit 0)" in page.locator("#job-status").inner_text(), page.locator("#job-output").inner_text()


def test_start_a_book_approve_and_revise_from_the_page(page, writer, tmp_path, shots):
    root = tmp_path / "books"
    root.mkdir()
    with serve(root) as url:
        page.goto(url + "/")
        page.click("#start-a-book")
        assert axe_violations(page) == []
        page.fill("#start-prompt", "A lighthouse keeper finds a bell that rings by itself.")
        page.fill("#start-words", "3000")
        page.check("#start-review")
        page.click("#start")
        finished(page)
        assert "in review: the outline" in page.locator("#job-output").inner_text()
        run = next(root.iterdir())
        page.goto(f"{url}/room/run/{run.name}")
        assert "In review: the outline" in page.locator("#in-review").inner_text()
        assert axe_violations(page) == []
        page.screenshot(path=str(shots / "room-outline.png"), full_page=True)
        page.click("#approve")
        finished(page)
        assert "In review: chapter 1" in page.locator("#in-review").inner_text()
        page.fill("#revise-note", NOTE)
        page.click("#revise")
        finished(page)
        assert "stored version 2" in page.locator("#job-output").inner_text()
        assert axe_violations(page) == []
        page.screenshot(path=str(shots / "room-revised.png"), full_page=True)
        log = page.locator("#actions").inner_text()
        assert "revise chapter 1 by view from 127.0.0.1 via view" in log and "approve outline" in log
        page.goto(f"{url}/run/{run.name}/story")  # the run's own pages say it waits, and lead to the room
        assert page.locator("#live").inner_text() == "review" and page.locator("#in-review-note").count() == 1
        assert axe_violations(page) == []
    with RunStore.open(run, readonly=True) as store:
        assert store.chapter(1).text.startswith(NOTE + ".") and store.chapter(1).version == 2
        assert [(a["what"], a["unit"], a["via"]) for a in actions(store)] == [
            ("approve", 0, "view"),
            ("revise", 1, "view"),
        ]
        assert store.live_status() == "review"


def test_actions_are_refused_without_the_tokens(page, writer, tmp_path):
    root = tmp_path / "books"
    root.mkdir()
    with serve(root) as url:
        page.goto(url + "/room")
        forged = page.request.post(url + "/room/start", form={"prompt": "x", "words": "3000", "pipeline": "nst"})
        assert forged.status == 403 and "session token" in forged.text()
        token = page.locator("input[name=csrf]").first.get_attribute("value")
        other_site = page.request.post(
            url + "/room/start",
            headers={"Origin": "http://evil.example"},
            form={"csrf": token, "prompt": "x", "words": "3000", "pipeline": "nst"},
        )
        assert other_site.status == 403 and "CSRF" in other_site.text()
        assert page.request.get(url + "/room/start").status == 405  # POST only
    assert list(root.iterdir()) == []
    settings = RoomSettings(access="s3cret")  # a view beyond loopback, started with --token
    with serve(root, room=settings) as url:
        page.goto(url + "/room")
        assert "needs the access token" in page.inner_text("main")
        assert axe_violations(page) == []
        no_access = page.request.post(
            url + "/room/start", form={"csrf": settings.token, "prompt": "x", "words": "3000", "pipeline": "nst"}
        )
        assert no_access.status == 403 and "access token" in no_access.text()
    with serve(root, room=RoomSettings(enabled=False)) as url:  # beyond loopback without --token
        page.goto(url + "/room")
        assert "Actions are off" in page.inner_text("main")
    assert list(root.iterdir()) == []
