"""docs/profiles.md's settings tables are built from the settings themselves (issue 33, item 6):
every setting of every shipped pipeline declares where its paper value comes from, a reason is
given exactly where the default departs from ``paper``, and the page on disk is what
scripts/profiles_doc.py builds now."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from agent import pipelines
from agent.settings import source_of

ROOT = Path(__file__).resolve().parents[1]


def script() -> ModuleType:
    """scripts/profiles_doc.py as a module (loaded once; scripts/ is not a package)."""
    if "profiles_doc" not in sys.modules:
        spec = importlib.util.spec_from_file_location("profiles_doc", ROOT / "scripts" / "profiles_doc.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["profiles_doc"] = module
        spec.loader.exec_module(module)
    return sys.modules["profiles_doc"]


def settings(name: str) -> type:
    cls = pipelines.get(name).settings
    assert cls is not None, f"{name} has no typed settings"
    return cls


@pytest.mark.parametrize("name", sorted(pipelines.BUILTIN))
def test_every_setting_declares_its_source(name: str) -> None:
    cls = settings(name)
    missing = [field for field in cls.model_fields if source_of(cls, field, name) is None]
    assert not missing, f"{cls.__name__} ({name}): no declared source for {missing} (agent.settings.Source)"
    for field in cls.model_fields:
        source = source_of(cls, field, name)
        assert source is not None and source.where.strip() and source.reading.strip(), field
        for other, _ in source.per:
            assert other in pipelines.BUILTIN, f"{field}: a source for an unknown pipeline {other!r}"


@pytest.mark.parametrize("name", sorted(pipelines.BUILTIN))
def test_a_reason_exactly_where_default_departs_from_paper(name: str) -> None:
    """A paper-sourced setting whose default is not its ``paper`` value says why, and one whose
    default is the paper's gives no reason; a setting of fabula's own is not changed by ``paper``."""
    cls = settings(name)
    doc = script()
    for row in doc.rows(name):
        if row.source.own:
            assert row.paper == row.default, f"{row.name}: fabula's own, yet `paper` sets it to {row.paper}"
            assert row.source.why, f"{row.name}: fabula's own setting with no word on what it is for"
        else:
            differs = row.paper != row.default
            assert bool(row.source.why) == differs, (
                f"{cls.__name__}.{row.name} ({name}): default {row.default}, paper {row.paper}, "
                f"why {row.source.why!r}: a reason is due exactly when the two differ"
            )


def test_profiles_page_is_generated_from_the_settings() -> None:
    doc = script()
    page = doc.PAGE.read_text(encoding="utf-8")
    assert doc.render(page) == page, "docs/profiles.md is stale: run PYTHONPATH=$PWD python scripts/profiles_doc.py"
    for name in pipelines.BUILTIN:
        for row in doc.rows(name):
            assert f"| `{row.name}` |" in page


def test_check_fails_on_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = script()
    stale = doc.PAGE.read_text(encoding="utf-8").replace("| `max_turns` | 50 |", "| `max_turns` | 40 |")
    page = tmp_path / "profiles.md"
    page.write_text(stale, encoding="utf-8")
    monkeypatch.setattr(doc, "PAGE", page)
    monkeypatch.setattr(doc, "ROOT", tmp_path)
    assert doc.main(["--check"]) == 1 and page.read_text(encoding="utf-8") == stale
    assert doc.main([]) == 0 and doc.main(["--check"]) == 0
    assert "| `max_turns` | 50 |" in page.read_text(encoding="utf-8")
