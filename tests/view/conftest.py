"""Runs shared by the view's tests: built once per session by the scripted models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.view.runs import magnet_run, nst_run


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("view-runs")
    nst_run(folder)
    magnet_run(folder)
    return folder


@pytest.fixture(scope="session")
def nst_dir(runs_dir) -> Path:
    return runs_dir / "keeper"


@pytest.fixture(scope="session")
def magnet_dir(runs_dir) -> Path:
    return runs_dir / "codicil"


@pytest.fixture(scope="session")
def workbench_dir(tmp_path_factory) -> Path:
    """The runs every page of the view is checked on: a seven-chapter NstAgent run with an edited
    chapter, a RollSum run, a Magnet run with a cast of five and secrets (one step edited), a batch."""
    from tests.view.runs import batch_folder, crowded_magnet_run, edit_a_step, edited_nst_run, rollsum_run

    folder = tmp_path_factory.mktemp("workbench-runs")
    edited_nst_run(folder)
    rollsum_run(folder)
    edit_a_step(crowded_magnet_run(folder))
    batch_folder(folder)
    return folder


CHROMIUM = os.environ.get("FABULA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser():
    """One headless Debian chromium for every browser test of the session (Playwright drives it)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (scripts/setup installs Debian's chromium package)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def shots(tmp_path_factory) -> Path:
    """The one folder every browser test writes its screenshots to (printed; see it with ``-s``):
    ``$FABULA_SCREENSHOTS`` when set (kept after the run), else a folder of the session's."""
    kept = os.environ.get("FABULA_SCREENSHOTS")
    folder = Path(kept) if kept else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {folder}")
    return folder
