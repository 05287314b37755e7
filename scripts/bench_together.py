#!/usr/bin/env python3
"""A Magnet step's independent calls on the embedded engine, one after another and decoded
together (#35), side by side in one run.

Builds the first step of the demo story (``agent/magnet/examples/thriller_museum.toml``) as
``fabula write magnet --profile small`` sends it: the three character requests, then the critic's
three reviews of fixed actions (under the static ``CriticReview``; a run's critic grammar also
names the story's subjects), with the small profile's sampling. Each round runs both sets one call
after another (``generate``) and together (``generate_many``) on one engine with the round's
seeds, in alternating order, the engine's KV caches emptied before each set so neither finds the
other's prompts. Prints each round's wall time, completion tokens and calls per set (a reply that
ran away and its retry both count), the medians, and the tokens per second over all rounds with
their ratio: the fair figure, since the same seeds still write replies of different lengths
together and alone (batched arithmetic rounds differently).

    .venv/bin/python scripts/bench_together.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.llm import LLMError  # noqa: E402
from agent.llm.base import Request  # noqa: E402
from agent.llm.embedded_engines import open_embedded  # noqa: E402
from agent.magnet import prompts  # noqa: E402
from agent.magnet.definition import load_definition  # noqa: E402
from agent.magnet.settings import MagnetSettings  # noqa: E402
from agent.magnet.world import WorldGraph  # noqa: E402
from grammars.magnet import CharacterAction, CriticReview  # noqa: E402

STORY = ROOT / "agent/magnet/examples/thriller_museum.toml"
ACTIONS = (
    "Nadia pulls up the east gallery feed and asks the guard on the radio who moved the reboot to eight.",
    "Julian slips the vitrine key into his sleeve and offers to fetch the director a glass of water.",
    "Ingrid taps her glass for silence and tells the donors the astrolabe will be unveiled at nine sharp.",
)


def step_requests(round_number: int) -> dict[str, list[Request]]:
    """The step's character requests and critic reviews, seeded by the round (both sides of a
    round draw with the same seeds; the rounds differ, so replies of different lengths average
    out over them)."""
    story = load_definition(STORY)
    world = WorldGraph.from_definition(story)
    small = MagnetSettings.parse(MagnetSettings.profile_settings("small"))
    sampling = small.structured_sampling

    def labelled(messages: list, output: type, temperature: float, max_tokens: int, seed: int, role: str) -> Request:
        return Request(messages, output, temperature, max_tokens, None, None, seed, role, sampling=sampling)

    characters = [
        labelled(
            prompts.character(story, char, story.goal, [], world, "", with_effects=False),
            CharacterAction,
            small.character_temperature,
            small.action_tokens,
            100 * round_number + n,
            "character",
        )
        for n, char in enumerate(story.characters)
    ]
    critics = [
        labelled(
            prompts.critic(story, char, action, story.goal, [], world, final=False, example=True),
            CriticReview,
            small.critic_temperature,
            small.critic_tokens,
            100 * round_number + 10 + n,
            "critic",
        )
        for n, (char, action) in enumerate(zip(story.characters, ACTIONS, strict=True))
    ]
    return {"characters": characters, "critics": critics}


def recorded_set(llm, requests: list[Request], together: bool) -> tuple[float, list]:
    """Wall seconds of one set and the calls the engine recorded (a reply that ran away and its
    retry both), on an engine whose KV caches were emptied first."""
    llm._slots.clear()
    llm._llama.reset()
    seen: list = []
    llm.recorders.append(seen.append)
    started = time.perf_counter()
    try:
        if together:
            llm.generate_many(requests, return_exceptions=True)
        else:
            for r in requests:
                with contextlib.suppress(LLMError):  # a 135M reply may be cut: its time and tokens count
                    llm.generate(
                        r.messages,
                        r.output_type,
                        temperature=r.temperature,
                        max_tokens=r.max_tokens,
                        seed=r.seed,
                        role=r.role,
                        sampling=r.sampling,
                    )
        took = time.perf_counter() - started
    finally:
        llm.recorders.remove(seen.append)
    return took, seen


def run_set(llm, requests: list[Request], together: bool) -> tuple[float, int, int]:
    """Wall seconds, completion tokens and calls of one set (:func:`recorded_set`)."""
    took, seen = recorded_set(llm, requests, together)
    return took, sum(record.completion_tokens for record in seen), len(seen)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    llm = open_embedded()
    if getattr(llm, "engine", "") != "llama.cpp":
        raise SystemExit("bench_together: the embedded engine here is not llama.cpp (run scripts/setup)")
    for request in step_requests(0)["critics"][:1] + step_requests(0)["characters"][:1]:
        llm.warm_up(llm._prepare(request).constraint)  # compile each grammar before timing
    seen: dict[tuple[str, bool], list[tuple[float, int]]] = {}
    for number in range(1, args.rounds + 1):
        for together in (number % 2 == 0, number % 2 == 1):
            side = "together" if together else "one after another"
            for name, requests in step_requests(number).items():
                took, tokens, calls = run_set(llm, requests, together)
                seen.setdefault((name, together), []).append((took, tokens))
                line = f"round {number} {name:<10} {side:<16} {took:6.2f} s {tokens:5d} tokens {calls:2d} calls"
                print(line, flush=True)
    print()
    for name in ("characters", "critics"):
        alone, both = seen[(name, False)], seen[(name, True)]
        a, b = statistics.median(t for t, _ in alone), statistics.median(t for t, _ in both)
        rate_a = sum(n for _, n in alone) / sum(t for t, _ in alone)
        rate_b = sum(n for _, n in both) / sum(t for t, _ in both)
        print(
            f"{name:<10} one after another: median {a:.2f} s, {rate_a:.1f} tokens/s   "
            f"together: median {b:.2f} s, {rate_b:.1f} tokens/s   rate together / alone: {rate_b / rate_a:.2f}"
        )
    llm.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
