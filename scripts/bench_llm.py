#!/usr/bin/env python3
"""Throughput of fabula's LLM layer: plain vs constrained on each backend, and 1 vs 8
concurrent requests on the server. Prints a table and writes JSON.

Every figure in one table is measured in the same run, side by side, because these
machines are noisy; the ratios are what to compare. Decode throughput is completion
tokens divided by wall time, with prompts kept short so that prefill is negligible.

    .venv/bin/python scripts/bench_llm.py                  # both backends; starts a tiny-cpu server
    .venv/bin/python scripts/bench_llm.py --endpoint URL   # use a running server instead
    .venv/bin/python scripts/bench_llm.py --backends embedded --tokens 64
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pydantic import Field  # noqa: E402

from agent.llm import LLM, Request  # noqa: E402
from grammars.base import Grammar  # noqa: E402


class Scene(Grammar):
    """A benchmark schema: mostly free prose inside JSON, like a tool call that carries text."""

    title: str
    mood: str = Field(pattern=r"^(tense|calm|eerie|joyful)$")
    paragraphs: list[str]


PROMPT = [{"role": "user", "content": "Write a long scene about a storm at sea, with a title, a mood "
           "(tense, calm, eerie or joyful) and several paragraphs."}]


def decode_rate(llm: LLM, output_type, tokens: int, repeats: int) -> tuple[float, list[int]]:
    """Median tokens/s over ``repeats`` sequential calls."""
    rates, counts = [], []
    for i in range(repeats):
        kwargs = {} if output_type is not None else {"min_tokens": tokens}
        started = time.perf_counter()
        try:
            completion = llm.generate(PROMPT, output_type, temperature=0.8, max_tokens=tokens, seed=i, **kwargs)
            produced = completion.usage.completion_tokens
        except Exception as exc:  # a structured reply cut at max_tokens still decoded its tokens
            from agent.llm import TruncatedOutputError

            if not isinstance(exc, TruncatedOutputError):
                raise
            produced = tokens
        elapsed = time.perf_counter() - started
        rates.append(produced / elapsed)
        counts.append(produced)
    return statistics.median(rates), counts


def concurrent_rate(llm: LLM, n: int, tokens: int) -> float:
    requests = [Request(PROMPT, None, temperature=0.8, max_tokens=tokens, min_tokens=tokens, seed=s)
                for s in range(n)]
    started = time.perf_counter()
    results = llm.generate_many(requests)
    elapsed = time.perf_counter() - started
    return sum(r.usage.completion_tokens for r in results) / elapsed


def bench_backend(name: str, llm: LLM, tokens: int, repeats: int, concurrency: bool) -> dict:
    from agent.llm.constraints import to_constraint

    if hasattr(llm, "warm_up"):
        llm.warm_up(to_constraint(Scene))
    # warm-up: the first calls pay schema compilation and allocator growth
    decode_rate(llm, None, 16, 1)
    decode_rate(llm, Scene, 16, 1)
    plain, plain_counts = decode_rate(llm, None, tokens, repeats)
    constrained, constrained_counts = decode_rate(llm, Scene, tokens, repeats)
    row = {
        "backend": name,
        "plain_tok_s": round(plain, 2),
        "constrained_tok_s": round(constrained, 2),
        "constrained_over_plain": round(constrained / plain, 3),
        "plain_tokens": plain_counts,
        "constrained_tokens": constrained_counts,
    }
    if concurrency:
        one = concurrent_rate(llm, 1, tokens)
        eight = concurrent_rate(llm, 8, tokens)
        row.update(one_stream_tok_s=round(one, 2), eight_streams_tok_s=round(eight, 2),
                   eight_over_one=round(eight / one, 3))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="embedded,server")
    parser.add_argument("--endpoint", help="use this running server instead of starting tiny-cpu")
    parser.add_argument("--tokens", type=int, default=96, help="completion tokens per request")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "bench_llm.json")
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
    print(f"{'backend':10} {'plain tok/s':>12} {'constr. tok/s':>14} {'constr/plain':>13} "
          f"{'1 stream':>9} {'8 streams':>10} {'8/1':>6}")
    for r in rows:
        print(f"{r['backend']:10} {r['plain_tok_s']:>12} {r['constrained_tok_s']:>14} "
              f"{r['constrained_over_plain']:>13} {r.get('one_stream_tok_s', '-'):>9} "
              f"{r.get('eight_streams_tok_s', '-'):>10} {r.get('eight_over_one', '-'):>6}")
    print("targets: constrained/plain >= 0.85 on both backends; 8/1 >= 4 on the server")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"tokens": args.tokens, "repeats": args.repeats, "rows": rows}, indent=2))
    print(f"wrote {args.out}")
    return 0


def bench_server(args: argparse.Namespace) -> dict:
    from agent.llm.endpoint import EndpointLLM

    if args.endpoint:
        with EndpointLLM(args.endpoint) as llm:
            return bench_backend("server", llm, args.tokens, args.repeats, concurrency=True)
    import socket

    from serve.launcher import ServeConfig, Server
    from serve.models import ensure_embedded_model, fabula_home
    from serve.presets import get_preset

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
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
