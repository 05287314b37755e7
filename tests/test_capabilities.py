"""A backend states what it can count through its public interface (``agent.llm.base.LLM``:
``context_length``, ``model_context``, ``token_counter``); ``agent.llm.context`` asks that and
reaches into no backend's private attributes (checked with ``ast``)."""

from __future__ import annotations

import ast
from pathlib import Path

from agent.llm.base import LLM
from agent.llm.context import CharsEstimate, TemplateCounter, counter_for, resolve_context
from agent.testing.author import Author

CONTEXT = Path(__file__).resolve().parents[1] / "agent" / "llm" / "context.py"
PRIVATE = {"_http", "hf_model", "limits", "_request", "tokenizer"}


def test_the_context_module_asks_public_capabilities_only():
    tree = ast.parse(CONTEXT.read_text(encoding="utf-8"))
    reached = [
        f"line {node.lineno}: {name}"
        for node in ast.walk(tree)
        for name in (
            [node.attr]
            if isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name) and node.value.id == "self")
            else [node.args[1].value]
            if isinstance(node, ast.Call)
            and getattr(node.func, "id", "") == "getattr"
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            else []
        )
        if name in PRIVATE
    ]
    assert not reached, reached


def test_a_backend_without_capabilities_is_estimated_and_unbudgeted():
    for name in ("context_length", "model_context", "token_counter"):
        assert hasattr(LLM, name)
    assert isinstance(counter_for(Author()), CharsEstimate)
    assert resolve_context(Author(), None)[0].tokens is None


def test_a_backend_that_states_its_capabilities_is_asked():
    class Counted(Author):
        @property
        def model_context(self) -> int:
            return 2048

        def token_counter(self):
            return TemplateCounter(type("T", (), {"apply_chat_template": lambda s, m, **k: [0] * 5})(), name="t")

    info, counter = resolve_context(Counted(), None)
    assert (info.tokens, info.source, info.exact, counter.count([{"role": "user", "content": "x"}])) == (
        2048,
        "embedded model config",
        True,
        5,
    )
