"""Dump every request of scripted runs of each pipeline, to show a refactor changes no prompt.

    PYTHONPATH=$PWD python scripts/dump_prompts.py OUT.jsonl [--profile paper]

Runs nst, rollsum and direct on the scripted author (agent/testing/author.py; nst also in a small context,
so the chapter budget gives way) and magnet and single
on the scripted story model (agent/testing/story_llm.py), in a temporary folder, and writes one
JSON line per request: the pipeline, the messages, the sampling settings and the grammar. Run it
before and after a change and ``diff`` the two files: empty means no prompt changed.
``--profile NAME`` runs every pipeline under that profile (default: none given, the default).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _finish(store: Any) -> None:
    from agent.store.reports.stats import summarize

    info, actions = store.info(), summarize(store).budget_actions
    print(
        f"{info.pipeline}: {info.status}, {info.last_unit} unit(s)" + (f"; gave way: {actions}" if actions else ""),
        file=sys.stderr,
    )
    store.close()


def _profile(name: str, profile: str | None) -> dict[str, Any]:
    """The settings ``profile`` switches on for pipeline ``name`` (nothing for the default)."""
    if not profile:
        return {}
    from agent.magnet.settings import MagnetConfig, SingleConfig
    from agent.nst.config import DirectConfig, NstConfig, RollSumConfig

    cls = {
        "nst": NstConfig,
        "rollsum": RollSumConfig,
        "direct": DirectConfig,
        "magnet": MagnetConfig,
        "single": SingleConfig,
    }[name]
    return cls.profile_settings(profile)


def main(out: str, profile: str | None = None) -> int:
    home = tempfile.mkdtemp(prefix="fabula-dump-")
    os.environ["FABULA_HOME"] = home
    from agent import pipelines
    from agent.llm.base import LLM, Request
    from agent.magnet.definition import parse_definition
    from agent.testing.author import Author
    from agent.testing.story_llm import StoryLLM, story_dict

    lines: list[str] = []
    current = {"pipeline": ""}
    original = LLM._prepare

    def record(self: LLM, request: Request) -> Request:
        prepared = original(self, request)
        schema = prepared.constraint.json_schema if prepared.constraint is not None else None
        entry: dict[str, Any] = {
            "pipeline": current["pipeline"],
            "role": prepared.role,
            "messages": prepared.messages,
            "temperature": prepared.temperature,
            "max_tokens": prepared.max_tokens,
            "min_tokens": prepared.min_tokens,
            "stop": prepared.stop,
            "seed": prepared.seed,
            "sampling": prepared.sampling.given(),
            "schema": schema,
        }
        lines.append(json.dumps(entry, sort_keys=True, ensure_ascii=False, default=str))
        return prepared

    LLM._prepare = record  # type: ignore[method-assign]
    llm = pipelines.LLMOptions(backend="scripted", model="scripted")
    for name in ("nst", "rollsum", "direct"):
        current["pipeline"] = name
        config = {
            "prompt": "A keeper finds a bell in the harbour.",
            "prompt_id": None,
            "words": 3000,
            **({"plan_cache": str(Path(home) / "plans" / name)} if name != "direct" else {}),
            **_profile(name, profile),
        }
        _finish(pipelines.start(Path(home) / name, name, config, llm, model=Author()))
    # a budgeted run: the chapter prompt fitted, reads paged, drafts dropped (a context of 8000 tokens)
    current["pipeline"] = "nst-budgeted"
    config = {
        "prompt": "A keeper finds a bell in the harbour.",
        "prompt_id": None,
        "words": 4000,
        "context_tokens": 8000,
        "plan_cache": str(Path(home) / "plans" / "budgeted"),
        **_profile("nst", profile),
    }
    _finish(pipelines.start(Path(home) / "nst-budgeted", "nst", config, llm, model=Author()))
    for name in ("magnet", "single"):
        current["pipeline"] = name
        config = {"story": parse_definition(story_dict(words=600), "test.toml").to_dict(), **_profile(name, profile)}
        _finish(pipelines.start(Path(home) / name, name, config, llm, model=StoryLLM()))
    Path(out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} requests written to {out}")
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    chosen = args[args.index("--profile") + 1] if "--profile" in args else None
    sys.exit(main(args[0], chosen))
