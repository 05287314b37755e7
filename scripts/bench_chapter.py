#!/usr/bin/env python3
"""A real NstAgent story on the embedded model, timed part by part, before and after (#35).

Runs the same small-profile story (``--words``, default 600) on the embedded SmolLM2 twice in
one process, one setting after the other: ``before`` decodes on a fixed one thread (the engine's
count until #35) with the update settings the small profile had until #35, ``after`` on the
cores the engine finds idle (:class:`agent.llm.decode_threads.DecodeThreads`) with the small
profile's. For each it prints the run's wall time, calls and failed calls, the time split per
role from the ledger (``fabula show RUN --timing``), and the ratio of its constrained decode rate
(the median cached ``nst_turn`` call) to the engine bench's rate at the same context: the same
engine decoding under a JSON schema on a prompt of that length. A ratio near 1 says the run
loses nothing beyond the engine itself.

    flock /tmp/fabula-heavy.lock .venv/bin/python scripts/bench_chapter.py [--words 600] [--keep DIR]
        [--only before|after]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_engines import context_messages  # noqa: E402

from agent import pipelines  # noqa: E402
from agent.llm.options import LLMOptions  # noqa: E402
from agent.llm.types import TIMING_PARTS, LLMError  # noqa: E402
from agent.nst.config import NstConfig  # noqa: E402
from agent.store.reports.costs import per_role_timing  # noqa: E402

PROMPT = "A lighthouse keeper finds a bell that rings by itself."
SETTINGS: tuple[tuple[str, int | None, dict[str, Any]], ...] = (
    ("before", 1, {"update_max_tokens": 4096, "failed_update_limit": 3, "fallback_full_update": True}),
    ("after", None, {}),
)
"""Per setting: decode threads (``None``: watched) and settings over the small profile (before
#35 its updates had the defaults: 4,096 tokens, three failed attempts, the full fallback first)."""
CACHED = 0.9
"""A call counts as cached when at least this share of its prompt was in the KV cache."""


def open_engine(threads: int | None) -> Any:
    from agent.llm.embedded_engines import transformers_available
    from agent.llm.embedded_llamacpp import LlamaCppLLM
    from agent.weights.fast_gguf import ensure_fast_gguf
    from agent.weights.models import ensure_embedded_model, ensure_gguf

    folder = ensure_embedded_model().path if transformers_available() else None
    return LlamaCppLLM(ensure_fast_gguf() or ensure_gguf(), tokenizer_dir=folder, threads=threads)


def story(llm: Any, folder: Path, words: int, settings: dict[str, Any]) -> dict[str, Any]:
    config = {
        "prompt": PROMPT,
        "words": words,
        "plan_cache": str(folder / "plans"),
        **NstConfig.profile_settings("small"),
        **settings,
    }
    started = time.perf_counter()
    store = pipelines.start(folder / "run", "nst", config, LLMOptions(backend="embedded"), model=llm)
    wall = time.perf_counter() - started
    with store:
        records = store.ledger.llm_calls()
        roles = per_role_timing(store)
        words_written = sum(len(c.text.split()) for c in store.chapters())
        degraded = sum(c.degraded for c in store.chapters())
    cached = [
        (r.prompt_tokens, r.completion_tokens / r.timing.decode)
        for r in records
        if r.role == "nst_turn"
        and r.timing
        and r.timing.decode > 0
        and r.completion_tokens >= 16
        and r.cached_prompt_tokens >= CACHED * r.prompt_tokens
    ]
    return {
        "wall_s": wall,
        "calls": len(records),
        "failed": sum(r.error is not None for r in records),
        "words": words_written,
        "degraded": degraded,
        "roles": roles,
        "turn_rate": statistics.median(rate for _, rate in cached) if cached else None,
        "turn_context": int(statistics.median(p for p, _ in cached)) if cached else None,
    }


def bench_rate(llm: Any, context: int) -> float:
    """The engine's constrained decode rate on a cached prompt of ``context`` tokens."""
    from grammars.nst import UpdateCall

    messages = context_messages(context, lambda request: len(llm.template.ids(request)))
    with contextlib.suppress(LLMError):  # cut at 2 tokens, as meant: the prompt is in the cache
        llm.generate(messages, UpdateCall, temperature=0.7, max_tokens=2, seed=1)
    seen: list[Any] = []
    llm.recorders.append(seen.append)
    try:
        llm.generate(messages, UpdateCall, temperature=0.7, max_tokens=128, seed=1)
    except LLMError:
        pass  # a reply cut at 128 tokens is still 128 decoded tokens
    finally:
        llm.recorders.remove(seen.append)
    record = seen[-1]
    return record.completion_tokens / record.timing.decode


def report(label: str, found: dict[str, Any], bench: float | None) -> list[str]:
    total = found["roles"][-1] if found["roles"] else None
    lines = [
        f"{label}: {found['wall_s']:.0f} s wall, {found['calls']} calls, {found['failed']} failed "
        f"({100 * found['failed'] / max(1, found['calls']):.0f}%), {found['words']} words, "
        f"{found['degraded']} chapters degraded"
    ]
    if total is not None:
        lines.append(
            "  seconds  " + "  ".join(f"{p} {total.parts[p]:.1f}" for p in TIMING_PARTS) + f"  other {total.other:.1f}"
        )
    for role in found["roles"][:-1]:
        rate = f"{role.decode_rate:.1f}" if role.decode_rate else "-"
        lines.append(f"  {role.role:<14} {role.calls:>3} calls  {role.latency_s:7.1f} s  decode {rate} tokens/s")
    if found["turn_rate"] and bench:
        lines.append(
            f"  cached constrained turns: median {found['turn_rate']:.1f} tokens/s at "
            f"{found['turn_context']} tokens of context; the engine bench there {bench:.1f}: "
            f"ratio {found['turn_rate'] / bench:.2f}"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=600)
    parser.add_argument("--keep", metavar="DIR", help="keep the runs in DIR (default: a temporary folder)")
    parser.add_argument("--only", choices=[label for label, _, _ in SETTINGS], help="run one setting alone")
    args = parser.parse_args()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-chapter-"))
    results = []
    for label, threads, settings in SETTINGS:
        if args.only and label != args.only:
            continue
        llm = open_engine(threads)
        try:
            found = story(llm, base / label, args.words, settings)
            bench = bench_rate(llm, found["turn_context"]) if found["turn_context"] else None
        finally:
            llm.close()
        extra = "".join(f", {k}={v}" for k, v in settings.items())
        lines = report(f"{label} (decode threads: {threads or 'watched'}{extra})", found, bench)
        print("\n".join(lines), flush=True)
        results.append(found)
    if len(results) < 2:
        return 0
    before, after = results
    print(
        f"after/before: wall {after['wall_s'] / before['wall_s']:.2f}, decode rate of cached turns "
        + (f"{after['turn_rate'] / before['turn_rate']:.2f}" if after["turn_rate"] and before["turn_rate"] else "-")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
