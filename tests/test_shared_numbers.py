"""One home for shared numbers and paths: the word and token limits, the tokens-per-word priors and
words per page live in ``agent/limits.py``, ``fabula_home`` in ``agent/weights/home.py``; no other module of
agent/, serve/ or grammars/ writes its own copy (checked on the source with ``ast``)."""

from __future__ import annotations

import ast
from pathlib import Path

from agent import limits

ROOT = Path(__file__).resolve().parents[1]
SHARED = {limits.MAX_WORDS, limits.TOKEN_CAP, limits.MAX_PAGE_WORDS}
"""Numbers distinctive enough to spot a copy by value; the priors and words per page by name."""
BY_NAME = ("TOKENS_PER_WORD", "PAGE_WORDS", "MAX_WORDS", "TOKEN_CAP", "CONTEXT_CAP")


def sources() -> list[Path]:
    return [p for package in ("agent", "serve", "grammars") for p in sorted((ROOT / package).rglob("*.py"))]


def test_shared_numbers_are_written_once():
    copies = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
        for path in sources()
        if path != ROOT / "agent" / "limits.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value in SHARED
    ]
    assert not copies, "import it from agent.limits:\n" + "\n".join(copies)


def test_shared_priors_and_limits_are_named_once():
    """A module-level assignment of a name like the shared ones (``TOKENS_PER_WORD = 1.35``,
    ``MAGNET_PAGE_WORDS = 500``, ``CONTEXT_CAP = ...``) outside agent/limits.py is a second copy."""
    copies = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {target.id}"
        for path in sources()
        if path != ROOT / "agent" / "limits.py"
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id.endswith(BY_NAME)
    ]
    assert not copies, "import it from agent.limits:\n" + "\n".join(copies)


def test_fabula_home_is_defined_once_outside_the_model_hosting_module():
    defined = [
        f"{path.relative_to(ROOT)}"
        for path in sources()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef) and node.name == "fabula_home"
    ]
    assert defined == ["agent/weights/home.py"], defined
    users = [
        f"{path.relative_to(ROOT)}"
        for path in sources()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom)
        and node.module == "agent.weights.models"
        and any(alias.name == "fabula_home" for alias in node.names)
    ]
    assert not users, users


def test_no_second_story_target_class():
    named = [
        f"{path.relative_to(ROOT)}"
        for path in sources()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name == "StoryTarget"
    ]
    assert named == ["agent/nst/config.py"], named
