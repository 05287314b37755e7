#!/usr/bin/env python3
"""Many stories at once on the CPU vLLM server, and per-story cache hits through the router (#11).

Two measurements, each on servers started here exactly as a user starts them:

1. **Throughput**: K short Direct stories one at a time, then the same K at once, on one
   ``fabula serve --preset tiny-cpu`` server: completion tokens/s and story words/min of each,
   and the ratio (target: >= 3x at K = 8; vLLM batches concurrent requests).
2. **Cache affinity**: K/2 multi-call stories (Direct with a narrow gate, so drafts are re-asked
   with the story's prompt as their prefix) at once on one replica (the plain server above) and
   through ``fabula serve --replicas 2`` (sglang-router with its ``cache_aware`` policy, then a
   second router with the ``manual`` policy over the same replicas, keyed by fabula's per-run
   header): each story's share of prompt tokens served from the prefix cache, and how many
   requests each replica served (target: the share no lower with two replicas than with one).
   On a 2-core machine the two replicas share the cores the single server had, so no speed-up
   is expected or measured.

The stories are written by ``agent.batch.run_batch`` (what ``fabula batch`` runs), K at a time,
one run directory each; the tables read the run directories.

    flock /tmp/fabula-heavy.lock .venv/bin/python scripts/bench_batch.py          # K = 8, a few minutes
    .venv/bin/python scripts/bench_batch.py --k 4 --skip-router

Writes ``bench-results/bench_batch.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.batch.runner import run_batch  # noqa: E402
from agent.llm.options import LLMOptions  # noqa: E402
from agent.store import RunStore  # noqa: E402
from agent.testing.ports import free_port  # noqa: E402

PREMISES = [
    "A lighthouse keeper finds a brass key inside a fish and searches the tower for its lock.",
    "Two rival bakers are snowed in together on the eve of the village harvest fair.",
    "A retired astronaut teaches her grandson to read the night sky from a Lisbon rooftop.",
    "A clockmaker's apprentice repairs a clock that runs backwards in old Prague.",
    "A night-shift nurse keeps receiving letters addressed to a patient who left years ago.",
    "A ferry pilot must cross a frozen lake one last time before the ice breaks.",
    "A librarian discovers that one returned book has a new chapter every morning.",
    "Three siblings inherit a vineyard on the condition that they harvest it together.",
]


BLOCK = 128
"""vLLM's CPU backend caches prompts in blocks of this many tokens."""
NOTES = (
    " Keep the tone quiet and precise. The weather matters to the plot. Every object that appears early "
    "returns at the end. Dialogue is sparse and each line reveals character. The ending is earned, not "
    "announced. Names are short and easy to remember. Time passes in one night or one day at most. The "
    "narrator never explains what the reader can infer. Small sensory details anchor every scene. "
) * 3
"""Writing notes that make each multi-call story's prompt ~350 tokens: vLLM's CPU backend caches
in 128-token blocks, and a shorter prompt would have no full block to find in the cache."""


@dataclass
class StoryResult:
    """What one run directory says about its story (read back from its run store)."""

    story: int
    status: str
    words: int
    calls: int
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int
    seconds: float
    follow_ups: int = 0
    """Calls after the story's first."""
    follow_ups_hit: int = 0
    """Of those, the ones that found the story's whole first prompt (its full 128-token blocks) cached:
    they reached the replica that served the story before."""

    @property
    def cache_share(self) -> float:
        return self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def run_stories(configs: list[dict[str, Any]], endpoint: str, out: Path, concurrency: int) -> list[StoryResult]:
    """K Direct stories as one batch (``agent.batch.run_batch``, the engine behind ``fabula
    batch``), ``concurrency`` at a time, one run directory each under ``out``; the stories'
    prompts differ, every other setting is the same for all of them."""
    shared = {key: value for key, value in configs[0].items() if key not in ("prompt", "words")}
    assert all({k: v for k, v in c.items() if k not in ("prompt", "words")} == shared for c in configs)
    out.mkdir(parents=True, exist_ok=True)
    prompts = out.with_name(out.name + "-prompts.jsonl")
    prompts.write_text("".join(json.dumps({"id": i + 1, "prompt": c["prompt"]}) + "\n" for i, c in enumerate(configs)))
    result = run_batch(
        out,
        "direct",
        prompts=prompts,
        words=configs[0]["words"],
        settings=shared,
        llm=LLMOptions("endpoint", endpoint=endpoint),
        concurrency=max(concurrency, 1),
    )
    rows = []
    for i, story in enumerate(result.stories):
        with RunStore.open(out / story.run_dir, readonly=True) as store:
            rows.append(read_result(i, store, (story.ended_at or 0) - (story.started_at or 0)))
    return rows


def read_result(i: int, store: RunStore, seconds: float) -> StoryResult:
    row = store.query(
        "SELECT count(*) AS calls, coalesce(sum(prompt_tokens), 0) AS p, "
        "coalesce(sum(cached_prompt_tokens), 0) AS c, coalesce(sum(completion_tokens), 0) AS o "
        "FROM llm_calls WHERE error IS NULL"
    )[0]
    calls = store.query("SELECT prompt_tokens, cached_prompt_tokens FROM llm_calls WHERE error IS NULL ORDER BY id")
    first = (calls[0]["prompt_tokens"] // BLOCK) * BLOCK if calls else 0
    hits = sum(1 for c in calls[1:] if first and c["cached_prompt_tokens"] >= first)
    return StoryResult(
        i,
        store.info().status,
        store.words_written(),
        row["calls"],
        row["p"],
        row["c"],
        row["o"],
        round(seconds, 1),
        max(len(calls) - 1, 0),
        hits,
    )


def story_configs(k: int, words: int, *, attempts: int, narrow: bool, tag: str = "") -> list[dict[str, Any]]:
    """K Direct stories; ``tag`` starts every prompt so that no earlier run's cache serves them."""
    gate = {"gate_low": 0.9, "gate_high": 1.1} if narrow else {}
    return [
        {
            "prompt": tag + PREMISES[i % len(PREMISES)] + ("" if i < len(PREMISES) else f" (variant {i})"),
            "words": words,
            "attempts": attempts,
            "min_tokens": False,
            **gate,
        }
        for i in range(k)
    ]


# -- servers ---------------------------------------------------------------------------------------
class Served:
    """``fabula serve ...`` as a child process; the endpoint it prints once ready."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agent.cli", "serve", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()
        started = time.monotonic()
        while not self.ready.wait(1):
            if self.process.poll() is not None or time.monotonic() - started > 900:
                self.stop()
                raise RuntimeError("fabula serve did not become ready:\n" + "\n".join(self.lines[-30:]))
        self.start_s = time.monotonic() - started
        line = next(x for x in self.lines if "ready in" in x)
        self.endpoint = line.split("endpoint=")[1].split()[0]
        self.model = line.split("model=")[1].split()[0]

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip())
            if "ready in" in line:
                self.ready.set()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                self.process.kill()


def requests_served(port: int) -> int:
    """Requests a vLLM server finished (its Prometheus counter), -1 if it cannot say."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return -1
    return int(
        sum(
            float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("vllm:request_success_total")
        )
    )


# -- measurements --------------------------------------------------------------------------------
def throughput(rows: list[StoryResult], seconds: float) -> dict[str, Any]:
    tokens = sum(r.completion_tokens for r in rows)
    words = sum(r.words for r in rows)
    return {
        "stories": len(rows),
        "finished": sum(r.status == "completed" for r in rows),
        "seconds": round(seconds, 1),
        "completion_tokens": tokens,
        "words": words,
        "tokens_per_s": round(tokens / seconds, 2),
        "words_per_min": round(60 * words / seconds, 1),
    }


def timed(configs: list[dict[str, Any]], endpoint: str, out: Path, concurrency: int) -> tuple[list[StoryResult], float]:
    started = time.monotonic()
    rows = run_stories(configs, endpoint, out, concurrency)
    return rows, time.monotonic() - started


def affinity(rows: list[StoryResult], served: list[int]) -> dict[str, Any]:
    shares = [r.cache_share for r in rows]
    return {
        "stories": len(rows),
        "finished": sum(r.status == "completed" for r in rows),
        "calls": sum(r.calls for r in rows),
        "cache_share_per_story": [round(s, 3) for s in shares],
        "follow_ups": sum(r.follow_ups for r in rows),
        "follow_ups_on_their_replica": sum(r.follow_ups_hit for r in rows),
        "cache_share_min": round(min(shares), 3),
        "cache_share_mean": round(sum(shares) / len(shares), 3),
        "requests_per_replica": served,
    }


POLICIES = ("cache_aware", "manual")


def through_router(policy: str, fleet: Served, port: int, multi: list[dict[str, Any]], work: Path) -> dict[str, Any]:
    """The multi-call stories through a router with ``policy`` over the fleet's two replicas:
    the fleet's own router (cache_aware), or a second router started here over the same replicas."""
    from serve.replicas import Router, RouterConfig

    router = None
    endpoint = fleet.endpoint
    if policy != "cache_aware":
        config = RouterConfig(
            worker_urls=(f"http://127.0.0.1:{port + 1}", f"http://127.0.0.1:{port + 2}"),
            model_id=fleet.model,
            port=free_port(),
            policy=policy,
            metrics_port=free_port(),
        )
        router = Router(config, work / f"router-{policy}.log")
        router.start()
        router.wait_ready(120)
        endpoint = config.endpoint
    try:
        configs = [{**c, "prompt": f"[{policy}] " + c["prompt"]} for c in multi]  # fresh prefixes per policy
        before = [requests_served(port + 1), requests_served(port + 2)]
        rows, _ = timed(configs, endpoint, work / f"two-replicas-{policy}", len(configs))
        after = [requests_served(port + 1), requests_served(port + 2)]
        return affinity(rows, [a - b for a, b in zip(after, before, strict=True)])
    finally:
        if router is not None:
            router.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=8, help="stories at once (default 8)")
    parser.add_argument("--words", type=int, default=60, help="words per throughput story (default 60)")
    parser.add_argument("--skip-router", action="store_true", help="only the one-server throughput part")
    parser.add_argument("--keep", type=Path, help="keep the run directories here")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "bench_batch.json")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-batch-"))
    results: dict[str, Any] = {"k": args.k, "words": args.words, "cpus": len(os.sched_getaffinity(0))}

    one = Served("--preset", "tiny-cpu", "--port", str(free_port()))
    try:
        print(f"one server ready in {one.start_s:.0f} s at {one.endpoint}", flush=True)
        configs = story_configs(args.k, args.words, attempts=1, narrow=False)
        run_stories(configs[:1], one.endpoint, work / "warmup", 1)  # grammar/graph warm-up, not measured
        rows, seconds = timed(configs, one.endpoint, work / "sequential", 1)
        results["sequential"] = throughput(rows, seconds)
        rows, seconds = timed(configs, one.endpoint, work / "concurrent", args.k)
        results["concurrent"] = throughput(rows, seconds)
        results["speedup_tokens_per_s"] = round(
            results["concurrent"]["tokens_per_s"] / results["sequential"]["tokens_per_s"], 2
        )
        if not args.skip_router:
            multi = [
                {**c, "prompt": c["prompt"] + NOTES}
                for c in story_configs(max(args.k // 2, 2), 40, attempts=3, narrow=True)
            ]
            rows, _ = timed(multi, one.endpoint, work / "one-replica", len(multi))
            results["one_replica"] = affinity(rows, [])
    finally:
        one.stop()
    if not args.skip_router:
        port = free_port(4)
        fleet = Served("--preset", "tiny-cpu", "--replicas", "2", "--port", str(port), "--cpu-kv-cache-gib", "1")
        try:
            print(f"router + 2 replicas ready in {fleet.start_s:.0f} s at {fleet.endpoint}", flush=True)
            for policy in POLICIES:
                results[f"two_replicas_{policy}"] = through_router(policy, fleet, port, multi, work)
        finally:
            fleet.stop()
    print_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {args.out}; runs in {work}")
    return 0


def print_table(r: dict[str, Any]) -> None:
    print(f"\n## bench_batch: {r['k']} Direct stories of ~{r['words']} words, tiny-cpu vLLM, {r['cpus']} CPU cores\n")
    print("| mode | stories | finished | seconds | completion tok | tok/s | words/min |")
    print("|---|---|---|---|---|---|---|")
    for mode in ("sequential", "concurrent"):
        m = r[mode]
        print(
            f"| {mode} | {m['stories']} | {m['finished']} | {m['seconds']} | {m['completion_tokens']} | "
            f"{m['tokens_per_s']} | {m['words_per_min']} |"
        )
    met = "met" if r["speedup_tokens_per_s"] >= 3 else "missed"
    print(f"\nconcurrent / sequential tokens/s: {r['speedup_tokens_per_s']}x (target >= 3x at K=8: {met})")
    if "one_replica" in r and "two_replicas_cache_aware" in r:
        print(
            "\n| serving | stories | calls | cache share per story | min | mean | follow-ups with the story's "
            "first prompt cached | requests per replica |"
        )
        print("|---|---|---|---|---|---|---|---|")
        rows = [("1 replica", "one_replica")] + [(f"router ({p}) + 2 replicas", f"two_replicas_{p}") for p in POLICIES]
        for name, key in rows:
            m = r[key]
            print(
                f"| {name} | {m['stories']} | {m['calls']} | {m['cache_share_per_story']} | {m['cache_share_min']} "
                f"| {m['cache_share_mean']} | {m['follow_ups_on_their_replica']}/{m['follow_ups']} "
                f"| {m['requests_per_replica'] or '-'} |"
            )
        for p in POLICIES:
            m = r[f"two_replicas_{p}"]
            met = m["cache_share_min"] >= r["one_replica"]["cache_share_min"] - 0.02
            print(
                f"\n{p}: follow-ups that reached their story's replica {m['follow_ups_on_their_replica']}/"
                f"{m['follow_ups']}; per-story cache share no lower than with 1 replica: {'met' if met else 'missed'}"
                " (the share also moves with draft lengths: a draft's last partial 128-token block is not cached)"
            )
        print("(2 cores: the two replicas share the cores one server had, so no speed-up is expected or measured)")


if __name__ == "__main__":
    raise SystemExit(main())
