"""The view while a book is written (#36), in a real headless Chromium: a live update patches the
page in place, so what a reader types in the search box survives it; "follow the latest chapter"
keeps the newest chapter in sight; a stopped run's page says why and the command that goes on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("FABULA_CHROMIUM", "/usr/bin/chromium")
if not Path(CHROMIUM).exists():
    pytest.skip(
        f"no Chromium at {CHROMIUM} (scripts/setup installs Debian's chromium package)", allow_module_level=True
    )
pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
pytest.importorskip("uvicorn")

from tests.view.runs import wait_for_unit  # noqa: E402
from tests.view.server import serve  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "store" / "fake_pipeline.py"
TYPED = "the silver key"


def _writing(run_dir: Path, chapters: int, delay: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(FAKE), "start", str(run_dir), str(chapters), str(delay)], cwd=ROOT)


def test_text_typed_in_the_search_box_survives_the_live_updates(browser, tmp_path, shots):
    run_dir = tmp_path / "runs" / "live"
    run_dir.parent.mkdir()
    writer = _writing(run_dir, 6, 1.5)
    try:
        wait_for_unit(run_dir, 1)
        with serve(run_dir.parent) as url:
            page = browser.new_context(viewport={"width": 1100, "height": 900}).new_page()
            page.goto(url + "/run/live/search")
            box = page.locator("#q")
            box.click()
            box.type(TYPED)
            page.evaluate("window.__stayed = true")
            before = page.locator("#progress").inner_text()
            page.wait_for_function(f"document.getElementById('progress').innerText !== {before!r}", timeout=20_000)
            assert page.evaluate("window.__stayed") is True  # patched in place, not reloaded
            assert box.input_value() == TYPED
            assert page.evaluate("document.activeElement.id") == "q"  # still typing there
            page.screenshot(path=str(shots / "live-search.png"))
            page.context.close()
    finally:
        writer.wait(timeout=60)
    assert writer.returncode == 0


def test_follow_the_latest_chapter_scrolls_to_each_new_chapter(browser, tmp_path):
    run_dir = tmp_path / "runs" / "follow"
    run_dir.parent.mkdir()
    writer = _writing(run_dir, 5, 1.0)
    try:
        wait_for_unit(run_dir, 1)
        with serve(run_dir.parent) as url:
            page = browser.new_context(viewport={"width": 1100, "height": 500}).new_page()
            page.goto(url + "/run/follow/story")
            page.check("#follow-latest")
            page.wait_for_selector("#unit-4", timeout=20_000)
            page.wait_for_timeout(400)
            latest = page.evaluate("[...document.querySelectorAll('#content [data-unit]')].pop().id")
            top = page.evaluate(f"document.getElementById('{latest}').getBoundingClientRect().top")
            height, scrolled = page.evaluate("[window.innerHeight, window.scrollY]")
            assert latest == "unit-4" or latest == "unit-5"
            assert scrolled > 0 and -5 <= top < height / 2, (latest, top)  # the newest chapter in sight
            page.context.close()
    finally:
        writer.wait(timeout=60)


def test_a_stopped_runs_page_says_why_and_how_to_go_on(browser, tmp_path):
    from agent.store import RunStore

    run_dir = tmp_path / "runs" / "broken"
    run_dir.parent.mkdir()
    subprocess.run([sys.executable, str(FAKE), "start", str(run_dir), "1", "0"], cwd=ROOT, check=True)
    with RunStore.open(run_dir) as store, pytest.raises(ConnectionError), store.sessions.hold("resume"):
        raise ConnectionError("the model server stopped answering (connection refused)")
    with serve(run_dir.parent) as url:
        page = browser.new_context(viewport={"width": 1100, "height": 900}).new_page()
        page.goto(url + "/run/broken/story")
        said = page.locator("#stopped-why").inner_text()
        assert "connection refused" in said and f"fabula resume {run_dir}" in said
        page.context.close()
