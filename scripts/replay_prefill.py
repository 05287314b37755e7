#!/usr/bin/env python3
"""Replay the prompts of two recorded runs on the embedded model, prefill only, side by side (#35).

Every recorded request of each run is sent again in order, with ``max_tokens=1``, to a fresh
llama.cpp engine (its prefix cache empty), ``--rounds`` times, the two runs alternating; prints
each replay's wall time, its prompt tokens and those not in the cache, and the medians. Two runs
of the same calls (the demo story before and after a prompt reorder, kept by ``bench_demo.py
--keep``) then differ only in how much of each prompt the cache holds, not in what the model
happened to write (a critic's reply that ran away and was asked again, a second step).
``--before-ubatch N`` replays the before side on an engine that computes its prefill N tokens at a
time (the same run twice then compares that setting against the engine's own).

    PYTHONPATH=$PWD python scripts/replay_prefill.py BEFORE/run.db AFTER/run.db [--rounds 3] [--before-ubatch 512]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def requests(db: str) -> list[list[dict[str, str]]]:
    """The messages of every model call a run recorded, in order."""
    con = sqlite3.connect(db)
    stored = {h: (role, text) for h, role, text in con.execute("SELECT hash, role, content FROM llm_messages")}
    calls = [json.loads(m) for (m,) in con.execute("SELECT messages FROM llm_calls ORDER BY id")]
    con.close()
    return [[{"role": stored[h][0], "content": stored[h][1]} for h in hashes] for hashes in calls]


def main() -> int:
    from agent.llm.embedded_llamacpp import PREFILL_UBATCH, LlamaCppLLM
    from agent.weights.home import fabula_home

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before-ubatch", type=int, default=PREFILL_UBATCH, help="the before side's prefill pass")
    parser.add_argument("--gguf", default=str(fabula_home() / "models" / "SmolLM2-135M-Instruct.Q8_0.gguf"))
    args = parser.parse_args()
    runs = {"before": requests(args.before), "after": requests(args.after)}
    times: dict[str, list[float]] = {side: [] for side in runs}
    passes = {"before": args.before_ubatch, "after": PREFILL_UBATCH}
    for number in range(1, args.rounds + 1):
        for side, calls in runs.items():
            llm = LlamaCppLLM(args.gguf, prefill_ubatch=passes[side])
            started, prompt, new = time.perf_counter(), 0, 0
            for messages in calls:
                usage = llm.generate(messages, temperature=0.0, max_tokens=1).usage
                prompt += usage.prompt_tokens
                new += usage.prompt_tokens - usage.cached_prompt_tokens
            took = time.perf_counter() - started
            llm.close()
            times[side].append(took)
            print(f"{side} round {number}: {took:.1f} s ({prompt} prompt tokens, {new} not cached)", flush=True)
    medians = {side: statistics.median(found) for side, found in times.items()}
    for side, median in medians.items():
        print(f"{side}: median {median:.1f} s over {args.rounds}")
    print(f"after / before: {medians['after'] / medians['before']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
