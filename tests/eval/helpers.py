"""Stored runs written with the store API and judges scripted as a function of the request."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.llm.base import Request
from agent.llm.types import Usage
from agent.store import RunStore
from agent.testing.scripted import ScriptedLLM


def judge_llm(fn: Callable[[Request], Any], model: str = "judge-a", *, context: int | None = None) -> ScriptedLLM:
    """A judge whose reply is ``fn(request)`` (a JSON-able object, a string, or an LLMError), stating a
    context of ``context`` tokens (None: it says nothing)."""
    return ScriptedLLM(fn, model=model, usage=Usage(100, 0, 20), context=context)


def schema_name(request: Request) -> str:
    return request.constraint.name if request.constraint else ""


def words(n: int, word: str = "word") -> str:
    """A paragraph of exactly ``n`` words."""
    return " ".join([word] * n) + "."


def make_run(
    root: Path,
    name: str,
    chapters: list[str],
    *,
    target: int = 10_000,
    prompt: str = "Write a story.",
    prompt_id: str | None = "1",
    pipeline: str = "nst",
    states: list[dict] | None = None,
    targets: list[int] | None = None,
    config: dict[str, Any] | None = None,
) -> Path:
    run_dir = root / name
    cfg = {"prompt": prompt, "prompt_id": prompt_id, "words": target, **(config or {})}
    store = RunStore.create(run_dir, pipeline=pipeline, config=cfg, model="writer")
    try:
        if targets is not None:
            store.plans.put(
                "outline",
                [
                    {"id": i, "title": f"T{i}", "description": "d", "target_words": t}
                    for i, t in enumerate(targets, start=1)
                ],
            )
        for i, text in enumerate(chapters, start=1):
            state = states[i - 1] if states else {"n": i}
            store.commit_chapter(i, f"Chapter {i}", text, state=state)
        store.finish()
    finally:
        store.close()
    return run_dir
