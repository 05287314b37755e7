"""scripts/prefix_reuse.py: what a run's requests leave to compute behind a prefix cache, by role."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("prefix_reuse", ROOT / "scripts" / "prefix_reuse.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tokens(messages):
    return [ord(c) for m in messages for c in f"<{m['role']}>{m['content']}"]


def _row(pipeline, role, system, user):
    return {
        "pipeline": pipeline,
        "role": role,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }


def test_each_request_finds_the_longest_prefix_any_earlier_request_of_its_pipeline_shares():
    rows = [
        _row("magnet", "character", "story", "Ann"),
        _row("magnet", "character", "story", "Bob"),
        _row("magnet", "critic", "story", "Ann"),  # all of it was asked before: only its last token is computed
        _row("nst", "critic", "story", "Ann"),  # another pipeline's run: nothing cached
    ]
    found = _script().reuse(rows, _tokens)
    whole = len(_tokens(rows[0]["messages"]))
    shared = len(_tokens([rows[0]["messages"][0]])) + len("<user>")
    assert found[("magnet", "character")] == [2, 2 * whole, whole + (whole - shared)]
    assert found[("magnet", "critic")] == [1, whole, 1]
    assert found[("nst", "critic")] == [1, whole, whole]
