"""A backend from another package: a distribution that declares one under the ``fabula.backends``
entry point group is chosen with ``--backend NAME`` like a built-in, imported only when named,
and a broken one is one line naming it (``agent.llm.backends``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent.cli import main
from agent.llm import backends, open_llm
from agent.llm.options import StoredModel, resolve

TOY = """
from agent.llm.base import LLM
from agent.llm.types import RawReply, Usage


class ToyLLM(LLM):
    backend = "toy"

    def _complete(self, request):
        return RawReply(text="a toy reply", finish_reason="stop", usage=Usage(3, 0, 2), model=self.model)


def open_toy(options, probe, routing_key):
    return ToyLLM(options.model or "toy-model")
"""


def distribution(folder: Path, name: str, entry_points: str, modules: dict[str, str]) -> None:
    """An installed distribution as ``importlib.metadata`` finds it on ``sys.path``: its dist-info and modules."""
    info = folder / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{backends.ENTRY_POINT_GROUP}]\n{entry_points}", encoding="utf-8")
    for module, source in modules.items():
        (folder / f"{module}.py").write_text(source, encoding="utf-8")


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """A site folder with two plugin distributions on ``sys.path``: ``toy`` and a ``broken`` one."""
    distribution(tmp_path, "toy_backend", "toy = toy_backend:open_toy\n", {"toy_backend": TOY})
    distribution(
        tmp_path,
        "broken_backend",
        "broken = broken_backend:open_broken\n",
        {"broken_backend": "raise RuntimeError('needs a GPU driver\\nthat is not here')\n"},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(backends, "_REGISTERED", dict(backends._REGISTERED))  # the plugins leave with the test
    backends._plugins.cache_clear()
    yield tmp_path
    backends._plugins.cache_clear()
    for module in ("toy_backend", "broken_backend"):
        sys.modules.pop(module, None)


def test_a_plugin_backend_is_chosen_on_the_command_line(plugins, capsys):
    assert main(["prompt", "--backend", "toy", "Say hello."]) == 0
    assert capsys.readouterr().out.strip() == "a toy reply"
    assert "broken_backend" not in sys.modules  # only the backend asked for is imported


def test_a_plugin_backend_opens_from_python_and_from_a_runs_record(plugins):
    with open_llm("toy", model="m1") as llm:  # type: ignore[arg-type]
        assert (llm.backend, llm.model) == ("toy", "m1")
    with resolve(stored=StoredModel(backend="toy", model="m2")).open() as llm:  # what resume does
        assert llm.model == "m2"
        assert llm.generate([{"role": "user", "content": "hi"}], temperature=0, max_tokens=5).text == "a toy reply"


def test_a_broken_plugin_is_one_line_naming_it(plugins, capsys):
    assert main(["prompt", "--backend", "broken", "Say hello."]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "the backend 'broken' (broken_backend:open_broken, from broken_backend 0.1) cannot be loaded" in err
    assert "RuntimeError: needs a GPU driver that is not here" in err


def test_an_unknown_backend_is_refused_by_the_command_line(plugins, capsys):
    with pytest.raises(SystemExit):
        main(["prompt", "--backend", "nowhere", "Say hello."])
    # another test of the same process may have registered a backend of its own (listed after the built-ins)
    assert "invalid choice: 'nowhere' (choose from 'embedded', 'endpoint'" in capsys.readouterr().err


def test_the_built_in_backends_are_registered_like_a_plugin():
    assert list(backends.BackendNames())[:2] == ["embedded", "endpoint"]
    assert all(backends.backend_factory(name) is not None for name in ("embedded", "endpoint"))
