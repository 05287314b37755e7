"""Every page of the view in headless Debian chromium, on runs the suite writes (a seven-chapter
NstAgent run with an edited chapter, a RollSum run, a Magnet run with a cast of five and secrets,
a batch folder; the live run is in test_browser.py): no serious or critical axe-core violation,
no sideways scrolling at 390 px, and a screenshot of each at 1280 and 390 px in the session's
screenshot folder (printed; see it with ``-s``)."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
pytest.importorskip("uvicorn")

from tests.view.browser_checks import axe_violations, sideways
from tests.view.server import serve

PAGES = [
    ("runs", "/", 200),
    ("book", "/run/edited/story", 200),
    ("outline", "/run/edited/outline", 200),
    ("cast", "/run/edited/cast", 200),
    ("character", "/run/edited/character?name=Character%200", 200),
    ("search", "/run/edited/search?q=lantern+bell", 200),
    ("versions", "/run/edited/versions", 200),
    ("versions-diff", "/run/edited/versions?unit=3&a=2&b=3", 200),
    ("state", "/run/edited/state", 200),
    ("ledger", "/run/edited/costs", 200),
    ("judgments", "/run/edited/judgments", 200),
    ("rollsum-book", "/run/summary/story", 200),
    ("rollsum-state", "/run/summary/state", 200),
    ("magnet-book", "/run/crowded/story", 200),
    ("magnet-cast", "/run/crowded/cast", 200),
    ("magnet-character", "/run/crowded/character?name=Ann", 200),
    ("magnet-versions", "/run/crowded/versions", 200),
    ("world-graph", "/run/crowded/state", 200),
    ("batch-story", "/run/night/1-story-1-a-bell-rings-at-sea/story", 200),
    ("not-found", "/run/edited/no-such-page", 404),
    ("cannot-open", "/run/broken/story", 409),
]


@pytest.fixture(scope="module")
def site(workbench_dir, tmp_path_factory):
    """The workbench runs served, with one run whose database is not a database (the error page)."""
    broken = workbench_dir / "broken"
    broken.mkdir(exist_ok=True)
    (broken / "run.db").write_bytes(b"not a database " * 100)
    with serve(workbench_dir) as url:
        yield url


@pytest.mark.parametrize("width", [1280, 390])
def test_every_page_is_accessible_fits_the_screen_and_is_shot(browser, site, shots, width):
    context = browser.new_context(viewport={"width": width, "height": 900 if width > 400 else 844})
    page = context.new_page()
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(site) else outside.append(r.url))
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    found: dict[str, list] = {}
    for name, path, status in PAGES:
        response = page.goto(site + path)
        assert response.status == status, f"{path}: {response.status}"
        assert sideways(page) <= 0, f"{path} scrolls sideways by {sideways(page)} px at {width} px"
        page.screenshot(path=str(shots / f"page-{name}-{width}.png"), full_page=False)
        if width > 1000:  # the rules do not depend on the width; once is enough
            violations = axe_violations(page)
            if violations:
                found[path] = violations
    context.close()
    assert not found, found
    assert not errors and not outside, (errors, outside)


def test_the_accessibility_check_fails_on_an_unlabeled_control(browser, site):
    """The check itself: a page with a text field and no label is a critical violation."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(site + "/run/edited/search")
    page.evaluate("document.querySelector('label[for=q]').remove()")
    ids = {v["id"] for v in axe_violations(page)}
    context.close()
    assert "label" in ids, ids
