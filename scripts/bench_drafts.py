#!/usr/bin/env python3
"""Structured replies on the embedded engine with and without prompt-lookup drafts (#35), side by
side in one run.

Three sets of real requests, each sent with drafts off and on (``LlamaCppLLM.drafts``), in
alternating order, on one engine whose KV caches are emptied before each set, with the same seeds
on both sides: the demo's first Magnet step as ``scripts/bench_together.py`` builds it (its three
character requests, then its three critic reviews, each list decoded together as the run decodes
it), and ``--run``'s NstAgent chapter turns (a 600-word small-profile run kept by ``bench_demo.py
--story nst --keep``): the last ``--turns`` conversations it sent, each asked for the small
profile's state update, one after another. Prints per set and side the wall time, completion
tokens, and the tokens per second of decoding (the calls' decode, mask and sampling time: a chapter
turn's prefill of thousands of tokens would hide it) over all rounds with their ratio, and how many
replies the two sides wrote alike (drafts change no sampling step, but a pass of several tokens
computes its logits in another order of sums than a pass of one, up to 0.14 apart on this model,
so replies part at near ties).

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_drafts.py [--rounds 3] [--run RUN/run.db --turns 4]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.llm.base import Request  # noqa: E402
from agent.llm.embedded_engines import open_embedded  # noqa: E402
from agent.nst.chapter.tools import update_grammar  # noqa: E402
from agent.nst.config import NstConfig  # noqa: E402
from scripts.bench_together import recorded_set, step_requests  # noqa: E402


def chapter_turns(db: Path, turns: int, round_number: int) -> list[Request]:
    """The last ``turns`` chapter conversations ``db`` recorded, each asked for an update under the
    small profile's grammar, budget and sampling (seeded by the round)."""
    small = NstConfig.parse({"prompt": "x", "words": 600, **NstConfig.profile_settings("small")})
    grammar = update_grammar((), small.min_past_events, True, entries=small.update_entry_limit)
    with sqlite3.connect(db) as con:
        stored = {h: (role, text) for h, role, text in con.execute("SELECT hash, role, content FROM llm_messages")}
        rows = con.execute("SELECT messages FROM llm_calls WHERE role = 'nst_turn' ORDER BY id DESC").fetchall()
    chosen = [[{"role": stored[h][0], "content": stored[h][1]} for h in json.loads(m)] for (m,) in rows[:turns]]
    return [
        Request(
            messages,
            grammar,
            0.7,
            small.update_max_tokens,
            None,
            None,
            1000 * round_number + n,
            "nst_turn",
            sampling=small.structured_sampling,
        )
        for n, messages in enumerate(reversed(chosen))
    ]


def run_set(llm, requests: list[Request], together: bool) -> tuple[float, float, list[tuple[int, str]]]:
    """Wall seconds, decoding seconds, and each recorded call's completion tokens and text
    (:func:`scripts.bench_together.recorded_set`)."""
    took, seen = recorded_set(llm, requests, together)
    decoding = sum(r.timing.decode + r.timing.mask + r.timing.sample for r in seen if r.timing is not None)
    return took, decoding, [(record.completion_tokens, record.text or "") for record in seen]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--run", type=Path, help="a kept NstAgent run's run.db (its chapter turns)")
    parser.add_argument("--turns", type=int, default=4)
    args = parser.parse_args()
    llm = open_embedded()
    if getattr(llm, "engine", "") != "llama.cpp":
        raise SystemExit("bench_drafts: the embedded engine here is not llama.cpp (run scripts/setup)")
    totals: dict[tuple[str, bool], list[float]] = {}  # wall s, decoding s, tokens
    alike: dict[str, list[int]] = {}
    for number in range(1, args.rounds + 1):
        sets = {name: (requests, True) for name, requests in step_requests(number).items()}
        if args.run:
            sets["nst updates"] = (chapter_turns(args.run, args.turns, number), False)
        for name, (requests, together) in sets.items():
            written: dict[bool, list[str]] = {}
            for drafts in (number % 2 == 0, number % 2 == 1):
                llm.drafts = drafts
                took, decoding, calls = run_set(llm, requests, together)
                written[drafts] = [text for _, text in calls]
                tokens = sum(n for n, _ in calls)
                sums = totals.setdefault((name, drafts), [0.0, 0.0, 0.0])
                sums[0] += took
                sums[1] += decoding
                sums[2] += tokens
                side = "drafts" if drafts else "no drafts"
                print(
                    f"round {number} {name:<12} {side:<9} {took:6.2f} s {tokens:5d} tokens {len(calls):2d} calls",
                    flush=True,
                )
            same = alike.setdefault(name, [0, 0])
            same[0] += sum(a == b for a, b in zip(written[False], written[True], strict=False))
            same[1] += max(len(written[False]), len(written[True]))
    print()
    for name, (equal, count) in alike.items():
        off, on = totals[(name, False)], totals[(name, True)]
        rate_off, rate_on = off[2] / off[1], on[2] / on[1]
        print(
            f"{name:<12} no drafts {off[0]:6.1f} s {int(off[2]):5d} tokens, decoding {rate_off:5.1f} tokens/s   "
            f"drafts {on[0]:6.1f} s {int(on[2]):5d} tokens, decoding {rate_on:5.1f} tokens/s   "
            f"drafts / none: {rate_on / rate_off:.2f}   replies alike {equal} of {count}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
