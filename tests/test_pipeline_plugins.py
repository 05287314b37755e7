"""A pipeline from another package (#32): a distribution that declares a ``fabula.pipelines`` entry
point is offered and written with exactly like a built-in, never replaces one, and a plugin that
does not load is one line naming it and its entry point while fabula's own pipelines go on working.

Each test installs a tiny distribution on the fly: a module and its ``NAME-0.1.dist-info`` (METADATA,
entry_points.txt) in a folder put on ``sys.path``, where ``importlib.metadata`` finds it as it finds
an installed package. Then it drives the writer's road through ``agent.cli.main``. The toy pipeline is
the example of docs/development.md."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import pipelines
from agent.cli import main
from agent.store import RunStore
from agent.testing.scripted import ScriptedLLM

STORY = "The toy robot wound itself up at midnight and walked out of the shop to find the girl who had lost it."

DOC = Path(__file__).resolve().parents[1] / "docs" / "development.md"


def documented_toy() -> str:
    """The toy pipeline module of docs/development.md's "A pipeline from another package": the test
    installs the example the docs show, so the example keeps working."""
    section = DOC.read_text(encoding="utf-8").split("## A pipeline from another package", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


TOY = documented_toy()


def install(folder: Path, module: str, source: str, entries: dict[str, str]) -> None:
    """A distribution ``module`` (version 0.1) in ``folder``: the module and its dist-info, declaring
    ``entries`` (name -> "module:attribute") in the ``fabula.pipelines`` group."""
    (folder / module).mkdir()
    (folder / module / "__init__.py").write_text(source, encoding="utf-8")
    info = folder / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n", encoding="utf-8"
    )
    lines = "".join(f"{name} = {where}\n" for name, where in entries.items())
    (info / "entry_points.txt").write_text(f"[{pipelines.PLUGIN_GROUP}]\n{lines}", encoding="utf-8")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on ``sys.path`` to install distributions into; the registry reads plugins afresh
    before and after, and the modules installed there are forgotten."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    for name in ("FABULA_ENDPOINT", "FABULA_MODEL", "FABULA_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    pipelines.rescan()
    before = set(sys.modules)
    yield folder
    pipelines.rescan()
    for name in set(sys.modules) - before:
        if name.startswith("toy_fabula_"):
            del sys.modules[name]


def test_a_plugins_pipeline_is_offered_and_writes_a_story_through_the_cli(site, tmp_path, monkeypatch, capsys):
    install(site, "toy_fabula_pipeline", TOY, {"toy": "toy_fabula_pipeline:PIPELINE"})
    assert pipelines.names() == (*pipelines.BUILTIN, "toy") and "toy" in pipelines.names("prompt")
    with pytest.raises(SystemExit):
        main(["write", "--help"])
    assert "a toy: the story in one call" in capsys.readouterr().out
    model = ScriptedLLM([STORY])
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda *args, **kw: model)
    out = tmp_path / "run"
    code = main(
        [
            "write",
            "toy",
            "--prompt",
            "A toy robot.",
            "--words",
            "20",
            "--out",
            str(out),
            "--quiet",
            "--endpoint",
            "http://127.0.0.1:9/v1",
        ]
    )
    assert code == 0, capsys.readouterr().err
    with RunStore.open(out, readonly=True) as store:
        assert (store.info().pipeline, store.info().status) == ("toy", "completed")
        assert [c.text for c in store.chapters()] == [STORY]
    assert [r.role for r in model.requests] == ["toy_story"]


def test_a_plugin_that_takes_a_builtins_name_is_ignored_with_one_warning(site, capsys):
    install(site, "toy_fabula_pipeline", TOY, {"direct": "toy_fabula_pipeline:PIPELINE"})
    assert pipelines.names() == tuple(pipelines.BUILTIN)
    assert pipelines.get("direct").help == "baseline: the whole story in one call"
    warning = capsys.readouterr().err.strip().splitlines()
    assert warning == [
        "fabula: warning: the pipeline plugin direct (entry point direct = toy_fabula_pipeline:PIPELINE "
        "in fabula.pipelines, from toy-fabula-pipeline 0.1) is ignored: direct is one of fabula's own "
        "pipelines"
    ]
    assert "toy_fabula_pipeline" not in sys.modules  # never imported


def test_a_plugin_that_fails_to_import_is_one_line_and_the_builtins_still_work(site, tmp_path, capsys):
    install(site, "toy_fabula_broken", "import toy_fabula_nowhere\n", {"broken": "toy_fabula_broken:PIPELINE"})
    assert pipelines.names("prompt") == ("nst", "rollsum", "direct") and pipelines.names() == tuple(pipelines.BUILTIN)
    said = (
        "the pipeline plugin broken (entry point broken = toy_fabula_broken:PIPELINE in fabula.pipelines, from "
        "toy-fabula-broken 0.1) failed to load: ModuleNotFoundError: No module named 'toy_fabula_nowhere'"
    )
    assert capsys.readouterr().err.strip().splitlines() == [f"fabula: warning: {said}"]  # once, however often asked
    with pytest.raises(pipelines.PluginError) as raised:
        pipelines.get("broken")
    assert str(raised.value) == said
    RunStore.create(tmp_path / "run", pipeline="broken", config={"prompt": "p"}).close()
    assert main(["resume", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"fabula: error: {said}"] and "Traceback" not in err


def test_a_plugin_that_yields_something_else_than_its_pipeline_is_refused(site, capsys):
    bare = TOY + 'BARE = Pipeline("bare", "chapter", write)\n'  # no settings: fabula write could not configure it
    install(
        site,
        "toy_fabula_pipeline",
        bare,
        {
            "other": "toy_fabula_pipeline:PIPELINE",
            "settings": "toy_fabula_pipeline:ToySettings",
            "bare": "toy_fabula_pipeline:BARE",
        },
    )
    assert pipelines.names() == tuple(pipelines.BUILTIN)
    err = capsys.readouterr().err
    assert "plugin other (entry point other = toy_fabula_pipeline:PIPELINE" in err
    assert "yields the pipeline toy, not other" in err
    assert "yields the class ToySettings, not an agent.pipelines.Pipeline" in err
    assert "plugin bare (entry point bare = toy_fabula_pipeline:BARE" in err and "WritingControls" in err
    assert len(err.strip().splitlines()) == 3
