"""A pipeline describes itself: outside its own package and the registry (``agent.pipelines.BUILTIN``)
no module of agent/ spells a pipeline's name; the CLI, batch, the view and the store ask the
registry (``pipelines.names``, ``pipelines.get(name)``) what a pipeline takes, shows and says.

Checked on the source with ``ast``: every string constant of every module (docstrings and
sentences are not names, so only a constant that *is* a name counts)."""

from __future__ import annotations

import ast
from pathlib import Path

from agent import pipelines

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / "agent" / "pipelines.py"


def home(name: str) -> Path:
    """The package a built-in pipeline lives in (``agent.nst.baselines.rollsum:PIPELINE`` -> agent/nst)."""
    module = pipelines.BUILTIN[name].partition(":")[0]
    return ROOT.joinpath(*module.split(".")[:2])


def spelled(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in pipelines.BUILTIN
    ]


def test_every_builtin_pipeline_lives_in_a_package_of_agent():
    for name in pipelines.BUILTIN:
        assert home(name).is_dir(), name


def test_no_pipeline_name_is_spelled_outside_its_package_and_the_registry():
    found = []
    for path in sorted((ROOT / "agent").rglob("*.py")):
        if path == REGISTRY:
            continue
        for line, name in spelled(path):
            if home(name) not in path.parents:
                found.append(f"{path.relative_to(ROOT)}:{line}: {name!r}")
    assert not found, "ask agent.pipelines instead of naming a pipeline:\n" + "\n".join(found)


def test_the_registry_describes_every_builtin_pipeline():
    prompted, storied = pipelines.names("prompt"), pipelines.names("story")
    assert set(prompted) | set(storied) == set(pipelines.BUILTIN) and not set(prompted) & set(storied)
    for name in pipelines.BUILTIN:
        described = pipelines.get(name)
        assert described.name == name and described.help and described.settings is not None
        assert described.state is not None and described.progress
        assert (described.story_config is not None) == (described.takes == "story")
