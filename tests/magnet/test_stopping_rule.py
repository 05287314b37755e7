"""One stopping rule for Magnet and its single-model baseline: the words still missing, the ending
window and the stop live in ``agent/magnet/ending.py``; no other module of the package computes
``target_words - words`` or compares the words to the target itself (checked with ``ast``)."""

from __future__ import annotations

import ast
from pathlib import Path

from agent.magnet import ending
from tests.magnet.stories import story

PACKAGE = Path(__file__).resolve().parents[2] / "agent" / "magnet"


def _names_target(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "target_words"


def test_only_ending_measures_the_words_left():
    found = []
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "ending.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and _names_target(node.left):
                found.append(f"{path.name}:{node.lineno}: target_words - ...")
            if isinstance(node, ast.Compare) and any(_names_target(c) for c in [node.left, *node.comparators]):
                found.append(f"{path.name}:{node.lineno}: compares with target_words")
    assert not found, "use agent.magnet.ending (remaining, in_ending_window, stop_reason):\n" + "\n".join(found)


def test_the_stop_reason_is_the_final_paragraph_then_the_target():
    s = story(words=600)
    assert ending.stop_reason(s, {"words": 10}, True) == "final paragraph written"
    assert ending.stop_reason(s, {"words": 600}, False) == "target length reached"
    assert ending.stop_reason(s, {"words": 599}, False) is None
    assert ending.remaining(s, {"words": 650}) == -50
