"""A grid file written for a test, the scripted author as the writer and a scripted judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.llm.base import Request
from agent.repro.simulated import instance
from tests.eval.helpers import schema_name

PROMPTS = [{"id": i, "prompt": f"Story {i}: a bell rings at sea."} for i in (1, 2, 3, 4)]


def prompt_set(root: Path, rows: list[dict[str, Any]] = PROMPTS) -> Path:
    path = root / "prompts.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def grid_file(
    root: Path, body: str = "", *, name: str = "g", methods: str | None = None, lengths: str = "[1000]", extra: str = ""
) -> Path:
    """A grid of Direct against RollSum (or ``methods``) over the test prompt set."""
    prompt_set(root)
    methods = methods or (
        '[[methods]]\nname = "Direct"\npipeline = "direct"\n\n[[methods]]\nname = "RollSum"\npipeline = "rollsum"\n'
    )
    path = root / f"{name}.toml"
    path.write_text(
        body
        or (
            f'name = "{name}"\ndescription = "a test grid"\ntables = "NstAgent"\nprofile = "default"\n'
            f'prompts = "prompts.jsonl"\nids = "1-2"\nlengths = {lengths}\n{extra}\n{methods}'
        )
    )
    return path


def judge_fn(quality: dict[str, int] | None = None):
    """A judge that reports no contradiction, scores quality ``quality[word]`` for a story whose
    text holds ``word`` (else 7), and answers every other grammar with its smallest instance."""

    def reply(request: Request) -> Any:
        schema = request.constraint.json_schema
        name = schema_name(request)
        if name == "CriterionScore":
            text = request.messages[-1]["content"]
            score = next((v for k, v in (quality or {}).items() if k in text), 7)
            return {"reason": "fine", "score": score}
        if name.endswith("Report"):
            return {"contradictions": []}
        return instance(schema, schema.get("$defs", {}))

    return reply
