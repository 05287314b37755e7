"""Runs shared by the view's tests: built once per session by the scripted models."""

from __future__ import annotations

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
