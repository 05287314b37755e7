#!/usr/bin/env python3
"""Throughput of fabula's LLM layer: plain vs constrained on each backend, and 1 vs 8
concurrent requests on the server. Prints a table with each target met or missed, and writes
``bench-results/bench_llm.json``.

Equal work: both sides ask for the same ``--tokens`` (max_tokens, and min_tokens on plain
output); throughput is completion tokens actually produced divided by wall time, and the
tokens of each side are reported so an early stop is visible. Plain and constrained calls are
interleaved (ABAB, the order flipped every repetition) so drift on a noisy machine hits both
alike; each figure is the median of ``--repeats`` repetitions (3), and so is 1-vs-8
concurrency, measured ``--repeats`` times, interleaved 1, 8, 1, 8, ... Prompts are short so
that prefill is negligible.

    .venv/bin/python scripts/bench_llm.py                  # both backends; starts a tiny-cpu server
    .venv/bin/python scripts/bench_llm.py --endpoint URL   # use a running server instead
    .venv/bin/python scripts/bench_llm.py --backends embedded --tokens 64
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_results import write_results  # noqa: E402  (scripts/ is on sys.path when a script runs)
from pydantic import Field  # noqa: E402

from agent.llm import LLM, Request, TruncatedOutputError  # noqa: E402
from agent.testing.ports import free_port  # noqa: E402
from grammars.base import Grammar  # noqa: E402

CONSTRAINED_OVER_PLAIN = 0.85
EIGHT_OVER_ONE = 4.0


class Scene(Grammar):
    """A benchmark schema: mostly free prose inside JSON, like a tool call that carries text."""

    title: str
    mood: str = Field(pattern=r"^(tense|calm|eerie|joyful)$")
    paragraphs: list[str]


PROMPT = [
    {
        "role": "user",
        "content": "Write a long scene about a storm at sea, with a title, a mood "
        "(tense, calm, eerie or joyful) and several paragraphs.",
    }
]


def one_call(llm: LLM, output_type, tokens: int, seed: int) -> tuple[float, int]:
    """``(seconds, completion tokens)`` of one call asking for ``tokens`` tokens."""
    kwargs = {} if output_type is not None else {"min_tokens": tokens}
    started = time.perf_counter()
    try:
        completion = llm.generate(PROMPT, output_type, temperature=0.8, max_tokens=tokens, seed=seed, **kwargs)
        produced = completion.usage.completion_tokens
    except TruncatedOutputError:  # a structured reply cut at max_tokens still decoded all its tokens
        produced = tokens
    return time.perf_counter() - started, produced


def plain_vs_constrained(llm: LLM, tokens: int, repeats: int) -> dict:
    """Interleaved plain and constrained calls; medians of the per-repetition rates and ratios."""
    plain, constrained, ratios, plain_tokens, constrained_tokens = [], [], [], [], []
    for rep in range(repeats):
        order = (None, Scene) if rep % 2 == 0 else (Scene, None)
        measured = {}
        for output_type in order:
            seconds, produced = one_call(llm, output_type, tokens, seed=rep)
            measured[output_type is None] = produced / seconds
            (plain_tokens if output_type is None else constrained_tokens).append(produced)
        plain.append(measured[True])
        constrained.append(measured[False])
        ratios.append(measured[False] / measured[True])
    return {
        "plain_tok_s": round(statistics.median(plain), 2),
        "constrained_tok_s": round(statistics.median(constrained), 2),
        "constrained_over_plain": round(statistics.median(ratios), 3),
        "plain_tok_s_runs": [round(x, 2) for x in plain],
        "constrained_tok_s_runs": [round(x, 2) for x in constrained],
        "plain_tokens": plain_tokens,
        "constrained_tokens": constrained_tokens,
    }


def concurrent_rate(llm: LLM, n: int, tokens: int, seed: int) -> float:
    requests = [
        Request(PROMPT, None, temperature=0.8, max_tokens=tokens, min_tokens=tokens, seed=seed * 100 + s)
        for s in range(n)
    ]
    started = time.perf_counter()
    results = llm.generate_many(requests)
    elapsed = time.perf_counter() - started
    return sum(r.usage.completion_tokens for r in results) / elapsed


def one_vs_eight(llm: LLM, tokens: int, repeats: int) -> dict:
    ones, eights, ratios = [], [], []
    for rep in range(repeats):
        one = concurrent_rate(llm, 1, tokens, rep)
        eight = concurrent_rate(llm, 8, tokens, rep)
        ones.append(one)
        eights.append(eight)
        ratios.append(eight / one)
    return {
        "one_stream_tok_s": round(statistics.median(ones), 2),
        "eight_streams_tok_s": round(statistics.median(eights), 2),
        "eight_over_one": round(statistics.median(ratios), 3),
        "eight_over_one_runs": [round(x, 3) for x in ratios],
    }


def bench_backend(name: str, llm: LLM, tokens: int, repeats: int, concurrency: bool) -> dict:
    from agent.llm.constraints import to_constraint

    if hasattr(llm, "warm_up"):
        llm.warm_up(to_constraint(Scene))
    # warm-up: the first calls pay schema compilation and allocator growth
    one_call(llm, None, 16, 0)
    one_call(llm, Scene, 16, 0)
    row = {"backend": name, **plain_vs_constrained(llm, tokens, repeats)}
    row["targets"] = [
        target(
            f"constrained/plain >= {CONSTRAINED_OVER_PLAIN}",
            row["constrained_over_plain"],
            row["constrained_over_plain"] >= CONSTRAINED_OVER_PLAIN,
        )
    ]
    if concurrency:
        row.update(one_vs_eight(llm, tokens, repeats))
        row["targets"].append(
            target(
                f"8 streams / 1 stream >= {EIGHT_OVER_ONE}",
                row["eight_over_one"],
                row["eight_over_one"] >= EIGHT_OVER_ONE,
            )
        )
    return row


def target(name: str, value: float, met: bool) -> dict:
    return {"target": name, "value": value, "met": met}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="embedded,server")
    parser.add_argument("--endpoint", help="use this running server instead of starting tiny-cpu")
    parser.add_argument("--tokens", type=int, default=96, help="completion tokens per request")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, help="where to write the figures (default bench-results/bench_llm.json)")
    args = parser.parse_args()

    rows = []
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if "embedded" in backends:
        from agent.llm.embedded import EmbeddedLLM

        with EmbeddedLLM() as llm:
            rows.append(bench_backend("embedded", llm, args.tokens, args.repeats, concurrency=False))
    if "server" in backends:
        rows.append(bench_server(args))

    print()
    print(
        f"{'backend':10} {'plain tok/s':>12} {'constr. tok/s':>14} {'constr/plain':>13} "
        f"{'1 stream':>9} {'8 streams':>10} {'8/1':>6}"
    )
    for r in rows:
        print(
            f"{r['backend']:10} {r['plain_tok_s']:>12} {r['constrained_tok_s']:>14} "
            f"{r['constrained_over_plain']:>13} {r.get('one_stream_tok_s', '-'):>9} "
            f"{r.get('eight_streams_tok_s', '-'):>10} {r.get('eight_over_one', '-'):>6}"
        )
    print(f"medians of {args.repeats} interleaved repetitions, {args.tokens} tokens asked on every side")
    for r in rows:
        for t in r["targets"]:
            print(f"target {r['backend']}: {t['target']}: {t['value']} -> {'met' if t['met'] else 'missed'}")
    write_results("bench_llm", {"tokens": args.tokens, "repeats": args.repeats, "rows": rows}, args.out)
    return 0


def bench_server(args: argparse.Namespace) -> dict:
    from agent.llm.endpoint import EndpointLLM

    if args.endpoint:
        with EndpointLLM(args.endpoint) as llm:
            return bench_backend("server", llm, args.tokens, args.repeats, concurrency=True)

    from agent.weights.home import fabula_home
    from agent.weights.models import ensure_embedded_model
    from serve.launcher import ServeConfig, Server
    from serve.presets import get_preset

    port = free_port()
    config = ServeConfig.from_preset(get_preset("tiny-cpu"), str(ensure_embedded_model().path), port=port)
    server = Server(config, fabula_home() / "logs" / f"bench-{port}.log")
    server.start()
    try:
        server.wait_ready(900, progress=lambda m: print("server:", m, flush=True))
        with EndpointLLM(config.endpoint) as llm:
            return bench_backend("server", llm, args.tokens, args.repeats, concurrency=True)
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
