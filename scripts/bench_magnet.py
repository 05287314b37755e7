#!/usr/bin/env python3
"""Magnet's action phase against a vLLM server: wall time with 1, 2 and 4 characters.

The characters' requests go out together (``generate_many``), so a server that batches
should take far less than n times as long for n characters. Target: 4 characters take at
most 2x the time of 1. Measured on the mystery example (its first n characters), with the
paper's temperatures. The action phase is the characters' round of requests (sent together);
with ``--with-critic`` one critic round (revisions off, so every run does the same work) is
timed too. Median of ``--repeats``.

    flock /tmp/fabula-heavy.lock .venv/bin/python scripts/bench_magnet.py            # starts tiny-cpu
    .venv/bin/python scripts/bench_magnet.py --endpoint URL --repeats 5             # a running server
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_results import write_results  # noqa: E402  (scripts/ is on sys.path when a script runs)

from agent.llm import LLM, Request  # noqa: E402
from agent.magnet import prompts, schemas  # noqa: E402
from agent.magnet.definition import load_definition  # noqa: E402
from agent.magnet.roles import Scene, ask_many, propose_actions  # noqa: E402
from agent.magnet.settings import MagnetSettings  # noqa: E402
from agent.magnet.world import WorldGraph  # noqa: E402

EXAMPLE = ROOT / "agent" / "magnet" / "examples" / "mystery_codicil.toml"


def cast(n: int):
    story = load_definition(EXAMPLE)
    chars = story.characters[:n]
    names = {c.name for c in chars}
    chars = [replace(c, relationships={k: v for k, v in c.relationships.items() if k in names}) for c in chars]
    return replace(story, characters=chars)


def measure(llm: LLM, n: int, repeats: int, settings: MagnetSettings, with_critic: bool) -> dict:
    story = cast(n)
    scene = Scene(story, WorldGraph.from_definition(story), story.goal, [])
    action_type = schemas.action_type(settings, scene.names)
    actions, phases, tokens = [], [], []  # phases stay empty without the critic
    for _ in range(repeats):
        requests = [Request(prompts.character(story, c, scene.goal, [], scene.view(c.name), "", with_effects=False,
                                              with_state=True),
                            action_type, temperature=settings.character_temperature,
                            max_tokens=settings.action_tokens, role="character") for c in story.characters]
        started = time.perf_counter()
        replies = ask_many(llm, requests, 0)
        actions.append(time.perf_counter() - started)
        tokens.append(sum(r.usage.completion_tokens for r in replies if not isinstance(r, Exception)))
        if with_critic:
            started = time.perf_counter()
            propose_actions(llm, scene, settings)
            phases.append(time.perf_counter() - started)
    return {"characters": n, "actions_s": statistics.median(actions),
            "action_phase_s": statistics.median(phases) if phases else None,
            "action_tokens": statistics.median(tokens), "max_tokens_per_action": settings.action_tokens}


def run(llm: LLM, repeats: int, with_critic: bool) -> list[dict]:
    settings = MagnetSettings(max_revisions=0)
    measure(llm, 1, 1, settings, False)  # warm-up: grammar compilation
    return [measure(llm, n, repeats, settings, with_critic) for n in (1, 2, 4)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", help="use this running server instead of starting tiny-cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", metavar="FILE",
                        help="where to write the rows (default bench-results/bench_magnet.json)")
    parser.add_argument("--with-critic", action="store_true", help="also time actions + one critic round")
    args = parser.parse_args()
    from agent.llm.endpoint import EndpointLLM

    if args.endpoint:
        with EndpointLLM(args.endpoint) as llm:
            rows = run(llm, args.repeats, args.with_critic)
    else:
        from serve.launcher import ServeConfig, Server
        from serve.models import ensure_embedded_model, fabula_home
        from serve.presets import get_preset

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        config = ServeConfig.from_preset(get_preset("tiny-cpu"), str(ensure_embedded_model().path), port=port)
        server = Server(config, fabula_home() / "logs" / f"bench-magnet-{port}.log")
        server.start()
        try:
            server.wait_ready(900, progress=lambda m: print("server:", m, flush=True))
            with EndpointLLM(config.endpoint) as llm:
                rows = run(llm, args.repeats, args.with_critic)
        finally:
            server.stop()
    base = rows[0]
    print(f"{'chars':>5} {'actions s':>10} {'x of 1':>7} {'tokens':>7} {'actions+critic s':>17} {'x of 1':>7}")
    for row in rows:
        phase = row["action_phase_s"]
        critic = (f"{phase:>17.2f} {phase / base['action_phase_s']:>7.2f}" if phase is not None
                  else f"{'-':>17} {'-':>7}")
        print(f"{row['characters']:>5} {row['actions_s']:>10.2f} {row['actions_s'] / base['actions_s']:>7.2f} "
              f"{row['action_tokens']:>7.0f} {critic}")
    ratio = rows[-1]["actions_s"] / base["actions_s"]
    met = ratio <= 2
    print(f"target: 4 characters <= 2x the time of 1 -> {ratio:.2f}x ({'met' if met else 'missed'})")
    write_results("bench_magnet", {"rows": rows, "targets": [{"target": "4 characters <= 2x the time of 1",
                                                              "value": round(ratio, 3), "met": met}]}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
