"""A fake chapter pipeline for the resume tests: scripted chapters, a scripted model, no server.

Run as a script it starts (``start RUN_DIR``) or resumes (``resume RUN_DIR ...``) a run in a
subprocess, so a test can kill it with SIGKILL at any moment.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agent import pipelines
from agent.llm.options import register_backend
from agent.llm.types import Usage
from agent.run_context import RunContext
from agent.testing.scripted import ScriptedLLM

NAME = "fake"


def echo(model: str) -> ScriptedLLM:
    """Replies with a fixed text; reports fixed usage so ledger totals are predictable."""
    return ScriptedLLM(lambda request: "ok", model=model, usage=Usage(100, 60, 5))


def chapter_text(index: int) -> str:
    """Scripted text: several sentences, one phrase unique to the chapter."""
    return (
        f"Chapter {index} opens at dawn. The ferryman counts {index} lanterns on the pier. "
        f"A gull cries over the harbour. Nobody mentions the silver key of chapter {index}."
    )


def run(ctx: RunContext[dict[str, Any]]) -> None:
    store, config = ctx.store, ctx.config
    llm = echo(config["llm"]["model"] or "fake-model")
    llm.recorders.append(store.ledger.recorder)
    total = int(config["chapters"])
    store.set_target(total)
    for index in range(store.next_unit(), total + 1):
        llm.generate(
            [{"role": "user", "content": f"write chapter {index}"}], temperature=0.7, max_tokens=64, role="writer"
        )
        store.ledger.record_tool_call(turn=1, tool="write", arguments={"chapter": index}, result="accepted")
        time.sleep(float(config.get("delay", 0.0)))
        store.commit_chapter(index, f"Part {index}", chapter_text(index), state={"written": list(range(1, index + 1))})
        if config.get("stop_after") == index:
            return
    store.finish()


register_backend("scripted", lambda options, probe, key: echo(options.model or "fake-model"))
"""Runs stored with this backend resume on the scripted model (the CLI opens a run's model first)."""
PIPELINE = pipelines.register(pipelines.Pipeline(NAME, "chapter", run, version="1", defaults={"delay": 0.0}))


if __name__ == "__main__":
    command, run_dir, *rest = sys.argv[1:]
    if command == "start":
        chapters, delay = int(rest[0]), float(rest[1])
        pipelines.start(
            run_dir,
            NAME,
            {"chapters": chapters, "delay": delay},
            pipelines.LLMOptions(backend="scripted", model="fake-model"),
        ).close()
    else:
        from agent.cli import main

        sys.exit(main(["resume", run_dir, *rest]))
