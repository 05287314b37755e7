"""Store fixtures: fresh run directories and the fake pipeline (loaded by path)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from agent.store import RunStore

HERE = Path(__file__).resolve().parent
FAKE_PIPELINE_PATH = HERE / "fake_pipeline.py"


def _load_fake() -> ModuleType:
    name = "fabula_fake_pipeline"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, FAKE_PIPELINE_PATH)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def fake() -> ModuleType:
    return _load_fake()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    s = RunStore.create(
        tmp_path / "run",
        pipeline="nst",
        config={"chapters": 3, "temperature": 0.7},
        model="m",
        backend="endpoint",
        initial_state={"characters": {}},
    )
    yield s
    s.close()


def _write_chapters(store: RunStore, texts: list[str]) -> None:
    for i, text in enumerate(texts, start=store.next_unit()):
        store.commit_chapter(i, f"Title {i}", text, state={"after": i})


@pytest.fixture
def write_chapters():
    """``write_chapters(store, texts)``: commit each text as the next chapter."""
    return _write_chapters
