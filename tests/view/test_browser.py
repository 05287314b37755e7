"""The web view in a real headless Chromium (Debian's ``chromium``, driven by Playwright):
chapter text, the degraded mark, the state timeline, the world graph, a judgment link to its
passage, and a chapter appearing while a scripted run commits it.

Screenshots are saved in the session's screenshot folder (its path is printed; see it with ``-s``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("FABULA_CHROMIUM", "/usr/bin/chromium")
if not Path(CHROMIUM).exists():
    pytest.skip(
        f"no Chromium at {CHROMIUM} (scripts/setup installs Debian's chromium package)", allow_module_level=True
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
pytest.importorskip("uvicorn")

from agent.store.readonly import open_readonly  # noqa: E402
from tests.view.browser_checks import axe_violations  # noqa: E402
from tests.view.runs import quotes, wait_for_unit  # noqa: E402
from tests.view.server import serve  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "store" / "fake_pipeline.py"


@pytest.fixture(scope="module")
def base_url(runs_dir):
    with serve(runs_dir) as url:
        yield url


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith("http://127.0.0.1:") else outside.append(r.url))
    yield page
    context.close()
    assert not errors, f"script errors on the page: {errors}"
    assert not outside, f"the page fetched from outside the view: {outside}"


def test_runs_list_leads_to_the_story_with_the_degraded_chapter_marked(page, base_url, nst_dir, shots):
    page.goto(base_url + "/")
    assert page.locator("#runs tr[data-run]").count() == 2
    page.click("text=keeper")
    page.wait_for_url("**/run/keeper/story")
    with open_readonly(nst_dir) as store:
        first, last = quotes(store)
        chapter3 = store.chapter(3).text
    assert page.locator("#story-title").inner_text() == "The Bell Keeper"
    assert page.locator("#unit-1 h2").inner_text() == "Chapter 1: Part 1"  # the planned title, not the model's
    text3 = page.locator("#unit-3").inner_text()
    assert chapter3.split("\n\n")[0] in text3 and last in text3
    assert first in page.locator("#unit-1").inner_text()
    degraded = page.locator("#unit-2 .degraded-note")
    assert degraded.is_visible() and "no draft passed the length gate" in degraded.inner_text()
    assert "degraded" in page.locator("#unit-2").get_attribute("class")
    page.screenshot(path=str(shots / "story.png"), full_page=False)
    page.locator("#unit-2").evaluate("e => e.scrollIntoView()")
    page.screenshot(path=str(shots / "degraded.png"), full_page=False)


def test_state_timeline_lists_changes_per_chapter(page, base_url, shots):
    page.goto(base_url + "/run/keeper/state")
    units = page.locator("article.unit-state")
    assert units.count() == 3
    added = page.locator('#state-2 li.change.added[data-collection="past_events"]')
    assert added.count() == 4 and "ch2_event_0" in added.first.inner_text()
    assert (
        page.locator('#state-1 li[data-collection="future_requirements"]')
        .first.inner_text()
        .startswith("added promise_1")
    )
    page.locator("#state-1 details").first.click()  # the full collection unfolds
    assert page.locator("#state-1 details dl").first.is_visible()
    page.screenshot(path=str(shots / "state.png"), full_page=False)


def test_magnet_world_graph_is_drawn(page, base_url, shots):
    page.goto(base_url + "/run/codicil/state")
    graph = page.locator("#world-graph svg")
    box = graph.bounding_box()
    assert box and box["width"] > 300 and box["height"] > 300
    assert graph.locator("g.card").count() == 5  # the world, three characters, their relations
    labels = graph.text_content()
    assert "Ann" in labels and "codicil_missing" in labels
    page.click("#state-1 .graph-link")
    page.wait_for_url("**/run/codicil/state?unit=1")
    assert "World graph after step 1" in page.locator("#state h2").first.inner_text()
    page.screenshot(path=str(shots / "graph.png"), full_page=False)


def test_ledger_plots_render(page, base_url):
    page.goto(base_url + "/run/keeper/costs")
    charts = page.locator(".charts svg")
    assert charts.count() == 3
    assert charts.nth(0).locator("rect").count() > 4 and charts.nth(0).bounding_box()["width"] > 200
    assert page.locator("#per-unit tbody tr").count() == 4  # the plan, then three chapters


def test_judgment_link_leads_to_the_marked_passage(page, base_url, nst_dir, shots):
    page.goto(base_url + "/run/keeper/judgments")
    with open_readonly(nst_dir) as store:
        first, _ = quotes(store)
    link = page.locator("a.quote-link").first
    assert first in link.inner_text()
    link.click()
    page.wait_for_url("**/run/keeper/story#q0-0-0")
    target = page.locator("mark:target")
    assert target.count() == 1 and target.inner_text() == first
    assert target.evaluate("e => e.closest('article').id") == "unit-1"
    top = target.evaluate("e => e.getBoundingClientRect().top")
    assert 0 <= top < 900  # scrolled into view
    assert page.locator(".quote-missing").count() == 0  # missing quotes are listed on the judgments page only
    page.screenshot(path=str(shots / "passage.png"), full_page=False)


def test_a_new_chapter_appears_while_a_run_commits_it(browser, tmp_path, shots):
    folder = tmp_path / "live-runs"
    folder.mkdir()
    run_dir = folder / "live"
    writer = subprocess.Popen([sys.executable, str(FAKE), "start", str(run_dir), "3", "1.5"], cwd=ROOT)
    try:
        wait_for_unit(run_dir, 1)
        with serve(folder) as url:
            context = browser.new_context(viewport={"width": 1100, "height": 900})
            page = context.new_page()
            page.goto(url + "/run/live/story")
            assert page.locator("#unit-1").count() == 1
            assert page.locator("#run-status").inner_text() == "writing"
            assert page.locator("#live").inner_text() == "writing"
            page.evaluate("window.__stayed = true")  # an in-place update keeps this; a reload would not
            page.wait_for_selector("#unit-3", timeout=20_000)
            assert "silver key of chapter 3" in page.locator("#unit-3").inner_text()
            page.wait_for_function("document.getElementById('run-status').innerText === 'completed'", timeout=20_000)
            page.wait_for_function("document.getElementById('live').innerText === 'completed'", timeout=5_000)
            assert page.evaluate("window.__stayed") is True
            page.screenshot(path=str(shots / "live.png"), full_page=True)
            assert not axe_violations(page)  # the live page after its in-place updates
            context.close()
    finally:
        writer.wait(timeout=60)
    assert writer.returncode == 0


WORKBENCH = [
    ("runs", "/"),
    ("book", "/run/keeper/story"),
    ("outline", "/run/keeper/outline"),
    ("cast", "/run/keeper/cast"),
    ("character", "/run/keeper/character?name=Character%200"),
    ("search", "/run/keeper/search?q=lantern+bell"),
    ("magnet-book", "/run/codicil/story"),
    ("magnet-cast", "/run/codicil/cast"),
    ("magnet-character", "/run/codicil/character?name=Ann"),
    ("not-found", "/run/keeper/no-such-page"),
]


@pytest.mark.parametrize("width", [1280, 390])
def test_workbench_pages_fit_the_screen_with_a_book_measure(browser, base_url, shots, width):
    context = browser.new_context(viewport={"width": width, "height": 900 if width > 400 else 844})
    page = context.new_page()
    for name, path in WORKBENCH:
        page.goto(base_url + path)
        sideways = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert sideways <= 0, f"{path} scrolls sideways by {sideways} px at {width} px"
        page.screenshot(path=str(shots / f"{name}-{width}.png"), full_page=False)
    page.goto(base_url + "/run/keeper/story")
    # characters per line of the book's text: 60-75 on a wide screen
    chars = page.evaluate("""() => { const p = document.querySelector('#unit-1 p.text');
        return p.textContent.length / Math.max(1,
        Math.round(p.getBoundingClientRect().height / parseFloat(getComputedStyle(p).lineHeight))); }""")
    if width > 1000:
        assert 55 <= chars <= 78, chars
    context.close()


LABELS = """() => {
  // boxes as drawn on the screen (Graphviz draws inside a transformed group, so getBBox's local
  // coordinates would not compare); a card is the own layout's g.card or Graphviz's g.node
  const svg = document.querySelector('#world-graph svg');
  const inside = (b, r) => b.left >= r.left - 0.5 && b.top >= r.top - 0.5 && b.right <= r.right + 0.5
    && b.bottom <= r.bottom + 0.5;
  const view = svg.getBoundingClientRect();
  const bad = [];
  const boxes = [...svg.querySelectorAll('text')].map(t => ({t: t.textContent, b: t.getBoundingClientRect(),
    card: t.closest('g.card, g.node')}));
  for (const {t, b, card} of boxes) {
    if (!inside(b, view)) bad.push('clipped by the drawing: ' + t);
    const outline = card && card.querySelector('rect, path, polygon');
    if (outline && !inside(b, outline.getBoundingClientRect())) bad.push('outside its card: ' + t);
  }
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i].b, c = boxes[j].b;
    if (a.left < c.right - 0.5 && c.left < a.right - 0.5 && a.top < c.bottom - 0.5 && c.top < a.bottom - 0.5)
      bad.push('overlap: ' + boxes[i].t + ' | ' + boxes[j].t);
  }
  return {labels: boxes.length, bad, layout: svg.classList.contains('graphviz') ? 'graphviz' : 'own'};
}"""


@pytest.mark.parametrize("layout", ["own", "graphviz"])
def test_world_graph_labels_never_overlap_nor_are_clipped(browser, workbench_dir, shots, monkeypatch, layout):
    """A cast of five with two-way relations, secrets and up to 20 variables each, drawn by each
    layout (Graphviz's neato, and fabula's own): every label's box (measured by Chromium) lies inside
    its card and the drawing, and no two labels meet."""
    if layout == "graphviz" and shutil.which("neato") is None:
        pytest.skip("Graphviz is not installed (scripts/setup installs Debian's graphviz package)")
    monkeypatch.setenv("FABULA_GRAPH_LAYOUT", layout)
    with serve(workbench_dir) as url:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.goto(url + "/run/crowded/state")
        found = page.evaluate(LABELS)
        page.locator("#world-graph").screenshot(path=str(shots / f"graph-crowded-{layout}.png"))
        context.close()
    assert found["layout"] == layout
    assert found["labels"] > 60 and not found["bad"], found["bad"][:10]
