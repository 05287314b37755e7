#!/usr/bin/env python3
"""Magnet benchmarks: a scripted 20-page run of a cast of five (state integrity and flat prompt
cost), and the action phase against a vLLM server (wall time with 1, 2 and 4 characters).

``--scripted``: the whole runner (store, memory, goals, ending) on a scripted model with a cast
of five, 20 pages. Per step it checks the world variables (target: no duplicate
subject/attribute pair ever, and no "shadow" variable whose attribute carries a character's
name, the signature of the old flat keys) and counts each request's prompt tokens (target:
mean prompt tokens per step flat within +-20 % from page 5 to page 20, thanks to bounded
memory). The scripted critic writes updates in the spellings that used to create duplicates:
unprefixed, prefixed with the character's own name, prefixed with another character's name,
and new attributes, from a fixed pool (so the state saturates as a real story's does). Tokens
are counted with the tiny model's tokenizer if it is already converted (``--tokenizer``), else
estimated as words plus punctuation marks.

    .venv/bin/python scripts/bench_magnet.py --scripted            # seconds, no model, no server

The characters' requests go out together (``generate_many``), so a server that batches
should take far less than n times as long for n characters. Target: 4 characters take at
most 2x the time of 1. Measured on the mystery example (its first n characters), with the
paper's temperatures. The action phase is the characters' round of requests (sent together);
with ``--with-critic`` one critic round (revisions off, so every run does the same work) is
timed too. Median of ``--repeats``.

Server mode:

    flock /tmp/fabula-heavy.lock .venv/bin/python scripts/bench_magnet.py            # starts tiny-cpu
    .venv/bin/python scripts/bench_magnet.py --endpoint URL --repeats 5             # a running server
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_results import write_results  # noqa: E402  (scripts/ is on sys.path when a script runs)

from agent.llm import LLM, Request  # noqa: E402
from agent.llm.types import Usage  # noqa: E402
from agent.magnet import prompts, schemas  # noqa: E402
from agent.magnet.asking import ask_many  # noqa: E402
from agent.magnet.definition import load_definition  # noqa: E402
from agent.magnet.roles import Scene, propose_actions  # noqa: E402
from agent.magnet.settings import MagnetSettings  # noqa: E402
from agent.magnet.world import WorldGraph  # noqa: E402
from agent.testing.ports import free_port  # noqa: E402
from agent.testing.scripted import ScriptedLLM  # noqa: E402

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
    action_type = schemas.action_type(settings, None)
    actions, phases, tokens = [], [], []  # phases stay empty without the critic
    for _ in range(repeats):
        requests = [
            Request(
                prompts.character(story, c, scene.goal, [], scene.world, "", with_effects=False),
                action_type,
                temperature=settings.character_temperature,
                max_tokens=settings.action_tokens,
                role="character",
            )
            for c in story.characters
        ]
        started = time.perf_counter()
        replies = ask_many(llm, requests, 0)
        actions.append(time.perf_counter() - started)
        tokens.append(sum(r.usage.completion_tokens for r in replies if not isinstance(r, Exception)))
        if with_critic:
            started = time.perf_counter()
            propose_actions(llm, scene, settings)
            phases.append(time.perf_counter() - started)
    return {
        "characters": n,
        "actions_s": statistics.median(actions),
        "action_phase_s": statistics.median(phases) if phases else None,
        "action_tokens": statistics.median(tokens),
        "max_tokens_per_action": settings.action_tokens,
    }


def run(llm: LLM, repeats: int, with_critic: bool) -> list[dict]:
    settings = MagnetSettings(max_revisions=0)
    measure(llm, 1, 1, settings, False)  # warm-up: grammar compilation
    return [measure(llm, n, repeats, settings, with_critic) for n in (1, 2, 4)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", help="use this running server instead of starting tiny-cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--json", metavar="FILE", help="where to write the rows (default bench-results/bench_magnet.json)"
    )
    parser.add_argument("--with-critic", action="store_true", help="also time actions + one critic round")
    parser.add_argument("--scripted", action="store_true", help="the scripted 20-page cast-of-five run instead")
    parser.add_argument("--pages", type=float, default=20, help="--scripted: story length in pages (default 20)")
    parser.add_argument(
        "--tokenizer",
        action="store_true",
        help="--scripted: count with the tiny model's tokenizer (must be converted already)",
    )
    args = parser.parse_args()
    if args.scripted:
        return scripted_main(args.pages, args.tokenizer, args.json)
    from agent.llm.endpoint import EndpointLLM

    if args.endpoint:
        with EndpointLLM(args.endpoint) as llm:
            rows = run(llm, args.repeats, args.with_critic)
    else:
        from agent.weights.home import fabula_home
        from agent.weights.models import ensure_embedded_model
        from serve.launcher import ServeConfig, Server
        from serve.presets import get_preset

        port = free_port()
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
        critic = (
            f"{phase:>17.2f} {phase / base['action_phase_s']:>7.2f}" if phase is not None else f"{'-':>17} {'-':>7}"
        )
        print(
            f"{row['characters']:>5} {row['actions_s']:>10.2f} {row['actions_s'] / base['actions_s']:>7.2f} "
            f"{row['action_tokens']:>7.0f} {critic}"
        )
    ratio = rows[-1]["actions_s"] / base["actions_s"]
    met = ratio <= 2
    print(f"target: 4 characters <= 2x the time of 1 -> {ratio:.2f}x ({'met' if met else 'missed'})")
    write_results(
        "bench_magnet",
        {
            "rows": rows,
            "targets": [{"target": "4 characters <= 2x the time of 1", "value": round(ratio, 3), "met": met}],
        },
        args.json,
    )
    return 0


# -- the scripted 20-page run --------------------------------------------------------------

FIFTH = {
    "name": "Nora Vale",
    "role": "the village doctor who signed the death certificate",
    "description": "Forty-eight, brisk, was called to the house the night Edmund died.",
    "personality": "Practical, dryly funny, keeps secrets for a living.",
    "goals": ["find out why Edmund asked for her the night he died"],
    "location": "the hall",
    "abilities": ["reads people", "knows the medicine cabinet"],
    "relationships": {"Martha Pell": "old friend", "Hugo Ashcombe": "treated his hand last winter"},
    "secrets": {"saw_a_second_glass": True},
}
POOL = ["location", "mood", "suspects", "has_key", "knows_about_codicil", "trusts_lucia"]
WORLD_POOL = ["codicil_missing", "storm_has_cut_the_phone_line", "lamps_lit", "clock_time"]
PLACES = ["the library", "the study", "the kitchen", "the drawing room", "the hall", "the cellar", "the attic"]
WORDS = [
    "rain",
    "candle",
    "letter",
    "ledger",
    "stair",
    "window",
    "portrait",
    "drawer",
    "ink",
    "clock",
    "silver",
    "fire",
    "door",
    "key",
    "dust",
    "glass",
    "whisper",
    "shadow",
    "floorboard",
    "seal",
    "envelope",
    "lamp",
    "coat",
    "gloves",
    "bell",
    "frost",
    "garden",
    "gate",
]


def five_cast():
    """The mystery example with a fifth character (and a secret for each)."""
    import tomllib

    from agent.magnet.definition import parse_definition

    data = tomllib.loads(EXAMPLE.read_text())
    data["characters"].append(FIFTH)
    secrets = ["destroyed_a_page", "owes_vance", "promised_to_burn_it", "altered_the_draft"]
    for char, key in zip(data["characters"], secrets, strict=False):
        char["secrets"] = {key: True}
    data["pages"] = 20
    return parse_definition(data, "bench: mystery + Nora Vale")


class ScriptedCast(ScriptedLLM):
    """Replies by role, deterministically (a seeded generator); counts each prompt's tokens."""

    def __init__(self, story, count) -> None:
        super().__init__(
            model="scripted-cast",
            usage=lambda request, text: Usage(count(request.messages), 0, count([{"content": text}])),
        )
        import random

        from agent.magnet.world import slug

        self.rng = random.Random(9)
        self.story = story
        self.slugs = {c.name: slug(c.name) for c in story.characters}

    def _name(self, text: str, marker: str) -> str:
        start = text.index(marker) + len(marker)
        return next(n for n in self.story.names if text.startswith(n, start))

    def _update(self, name: str) -> dict:
        rng, attr = self.rng, self.rng.choice(POOL)
        value = rng.choice(PLACES) if attr == "location" else rng.choice(["true", "false", "uneasy", "calm", "3"])
        style = rng.randrange(5)
        if style == 0:  # prefixed with the character's own name (the old flat key)
            return {"subject": name, "attribute": f"{self.slugs[name]}_{attr}", "value": value}
        if style == 1:  # another character's key, written under this one
            other = rng.choice([n for n in self.story.names if n != name])
            return {"subject": name, "attribute": f"{self.slugs[other]}_{attr}", "value": value}
        if style == 2:  # a world variable
            return {"subject": "world", "attribute": rng.choice(WORLD_POOL), "value": value}
        if style == 3:  # a relationship
            other = rng.choice([n for n in self.story.names if n != name])
            return {
                "subject": name,
                "attribute": f"relationship_with_{self.slugs[other]}",
                "value": rng.choice(["ally", "suspicious of", "owes a favour to"]),
            }
        return {"subject": name, "attribute": attr, "value": value}

    def _prose(self, n: int) -> str:
        names = self.story.names
        sentences = []
        while sum(len(x.split()) for x in sentences) < n:
            words = " ".join(self.rng.choice(WORDS) for _ in range(8))
            sentences.append(f"{self.rng.choice(names)} turned toward {self.rng.choice(PLACES)}, {words}.")
        return " ".join(sentences)

    def answer(self, request):
        text = request.messages[-1]["content"]
        role = request.role
        if role == "character":
            name = self._name(request.messages[1]["content"], "Your character is ")
            reply = {"action": f"{name} {self._prose(20)}"}
        elif role == "critic":
            name = self._name(text, "Proposed action of ")
            props = request.constraint.json_schema["properties"]
            reply = {
                "goal_reached": self.rng.random() < 0.04,
                "world_updates": [self._update(name) for _ in range(self.rng.randrange(1, 3))],
            }
            if "verdict" in props:
                revise = self.rng.random() < 0.15
                reply.update(
                    verdict="revise" if revise else "accept", feedback="Be more specific." if revise else "Concrete."
                )
        elif role == "narrator-select":
            schema = request.constraint.json_schema["properties"]
            items = schema["selected"]["items"]
            names = [items["const"]] if "const" in items else list(items["enum"])
            self.rng.shuffle(names)
            ids = schema["rejected_updates"]["items"].get("enum", [])
            reply = {
                "selected": names[: self.rng.randrange(1, len(names) + 1)],
                "rejected_updates": ids[:1] if ids and self.rng.random() < 0.2 else [],
            }
        elif role == "goal":
            reply = {"goal": f"Find out {self._prose(10)}"}
        elif role in ("narrator", "transition", "recap"):
            reply = self._prose({"narrator": 120, "transition": 60, "recap": 150}[role])
        else:
            raise AssertionError(role)
        return reply


def token_counter(use_tokenizer: bool):
    """The tiny model's tokenizer (chat template included), or words plus punctuation marks."""
    import re

    if use_tokenizer:
        from transformers import AutoTokenizer

        from agent.weights.models import embedded_model_dir, embedded_model_status

        if embedded_model_status() != "ready":
            raise SystemExit("--tokenizer: the embedded model is not converted yet (run scripts/demo once)")
        tok = AutoTokenizer.from_pretrained(embedded_model_dir())
        return lambda messages: len(tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True))
    pattern = re.compile(r"\w+|[^\w\s]")
    return lambda messages: sum(len(pattern.findall(str(m.get("content", "")))) + 4 for m in messages)


def scripted_main(pages: float, use_tokenizer: bool, json_path: str | None) -> int:
    import tempfile

    from agent.magnet.runner import write_story
    from agent.magnet.world import WorldGraph, slug
    from agent.store import RunStore

    story = five_cast().with_length(pages=pages)
    llm = ScriptedCast(story, token_counter(use_tokenizer))
    config = {**MagnetSettings().as_config(), "story": story.to_dict()}
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore.create(Path(tmp) / "run", pipeline="magnet", config=config, unit_kind="step")
        with store.sessions.hold("start"):
            write_story(store, llm, config)
        steps = store.steps()
        tokens = {row[0]: row[1] for row in store.query("SELECT unit, sum(prompt_tokens) FROM llm_calls GROUP BY unit")}
        prefixes = tuple(slug(n) + "_" for n in story.names)
        rows = []
        for s in steps:
            world = WorldGraph.from_json(store.state(s["step"])["world"])
            pairs = world.pairs()
            shadows = [p for p in pairs if p[1].startswith(prefixes)]
            rows.append(
                {
                    "step": s["step"],
                    "page": s["record"]["words_total"] / story.page_words,
                    "variables": len(pairs),
                    "duplicates": len(pairs) - len(set(pairs)),
                    "shadows": len(shadows),
                    "prompt_tokens": tokens.get(s["step"], 0),
                    "failures": len(s["record"].get("failures", [])),
                }
            )
        calls = len(store.ledger.llm_calls())
    print(
        f"scripted cast of five, {pages:g} pages ({story.target_words} words): {len(rows)} steps, {calls} calls, "
        f"tokens counted with {'the tiny model tokenizer' if use_tokenizer else 'the word+punctuation estimate'}"
    )
    print(f"{'page':>4} {'steps':>5} {'variables':>9} {'dup pairs':>9} {'shadows':>7} {'prompt tok/step':>15}")
    by_page: dict[int, list[dict]] = {}
    for r in rows:
        by_page.setdefault(min(int(r["page"] - 1e-9) + 1, int(pages)), []).append(r)
    for page, rs in sorted(by_page.items()):
        mean = statistics.mean(r["prompt_tokens"] for r in rs)
        print(
            f"{page:>4} {len(rs):>5} {rs[-1]['variables']:>9} {max(r['duplicates'] for r in rs):>9} "
            f"{max(r['shadows'] for r in rs):>7} {mean:>15.0f}"
        )
    dups = max(r["duplicates"] + r["shadows"] for r in rows)
    early = statistics.mean(r["prompt_tokens"] for r in by_page.get(5, []) or [{"prompt_tokens": 0}])
    late_page = max(by_page)
    late = statistics.mean(r["prompt_tokens"] for r in by_page[late_page])
    change = late / early - 1 if early else float("inf")
    print(f"target: no duplicate subject/attribute pairs, ever -> {dups} ({'met' if dups == 0 else 'NOT met'})")
    print(
        f"target: prompt tokens per step flat within +-20% from page 5 to page {late_page} -> {early:.0f} -> "
        f"{late:.0f} ({change:+.1%}, {'met' if abs(change) <= 0.2 else 'NOT met'})"
    )
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if dups == 0 and abs(change) <= 0.2 else 1


if __name__ == "__main__":
    sys.exit(main())
