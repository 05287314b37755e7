#!/usr/bin/env python3
"""Does the small-model profile stop the tiny model's loops? Default vs small, same seeds (#16).

Runs, on the embedded SmolLM2-135M (CPU), the demo's Magnet story and an NstAgent story once
with each profile, and prints per profile: the repeated-4-gram rate and distinct-3 of the
prose (``agent.repetition``, the measure ``fabula eval metrics`` uses), failed calls per step
or chapter, first-attempt gate pass and chapters degraded for running to the token limit
(NstAgent), and wall time per step or chapter, with each target marked met/missed. Writes
``bench-results/bench_small.json``.

    flock /tmp/fabula-heavy.lock .venv/bin/python scripts/bench_small.py                 # both pipelines
    .venv/bin/python scripts/bench_small.py --skip-nst --magnet-words 200                # the demo only
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent import pipelines  # noqa: E402
from agent.magnet.definition import load_definition  # noqa: E402
from agent.magnet.settings import MagnetSettings  # noqa: E402
from agent.nst.config import NstConfig  # noqa: E402
from agent.repetition import distinct_n, repeated_ngram_rate, tokens  # noqa: E402
from agent.store.snapshots import ChapterSnapshot  # noqa: E402

DEMO = ROOT / "agent" / "magnet" / "examples" / "thriller_museum.toml"
PROMPT = "A lighthouse keeper finds a letter from the future."


def _prose_metrics(text: str) -> dict[str, Any]:
    toks = tokens(text)
    return {"words": len(toks), "repeated_4gram_rate": repeated_ngram_rate(toks, 4), "distinct_3": distinct_n(toks, 3)}


def magnet_run(folder: Path, profile: str, words: int, llm: pipelines.LLMOptions) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    config = {
        **MagnetSettings.profile_settings(profile),
        "story": load_definition(DEMO).with_length(words=words).to_dict(),
    }
    started = time.perf_counter()
    store = pipelines.start(folder / f"magnet-{profile}", "magnet", config, llm)
    wall = time.perf_counter() - started
    with store:
        text = "\n\n".join(p.text for p in store.paragraphs())
        steps = store.info().last_unit
        failed = store.query("SELECT count(*) FROM llm_calls WHERE error IS NOT NULL")[0][0]
        calls = store.query("SELECT count(*) FROM llm_calls")[0][0]
    return {
        "pipeline": "magnet",
        "profile": profile,
        **_prose_metrics(text),
        "units": steps,
        "calls": calls,
        "failed_calls": failed,
        "failed_per_unit": failed / steps if steps else None,
        "wall_s": round(wall, 1),
        "wall_per_unit_s": round(wall / steps, 1) if steps else None,
        "wall_per_100_words_s": _per_100(wall, text),
        "first_100_words": " ".join(text.split()[:100]),
    }


def nst_run(folder: Path, profile: str, words: int, llm: pipelines.LLMOptions, max_turns: int) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    config = {
        "prompt": PROMPT,
        "words": words,
        "plan_cache": str(folder / f"plans-{profile}"),
        "max_turns": max_turns,
        **NstConfig.profile_settings(profile),
    }
    started = time.perf_counter()
    store = pipelines.start(folder / f"nst-{profile}", "nst", config, llm)
    wall = time.perf_counter() - started
    with store:
        chapters = store.chapters()
        text = "\n\n".join(c.text for c in chapters)
        firsts = [ChapterSnapshot.read(store.state(c.index)).first_attempt_pass for c in chapters]
        cut = sum(1 for c in chapters if c.degraded and "token limit" in (c.degraded_reason or ""))
        failed = store.query("SELECT count(*) FROM llm_calls WHERE error IS NOT NULL")[0][0]
        calls = store.query("SELECT count(*) FROM llm_calls")[0][0]
    n = len(chapters)
    return {
        "pipeline": "nst",
        "profile": profile,
        **_prose_metrics(text),
        "units": n,
        "calls": calls,
        "failed_calls": failed,
        "failed_per_unit": failed / n if n else None,
        "first_attempt_pass": sum(1 for f in firsts if f),
        "degraded": sum(c.degraded for c in chapters),
        "degraded_token_limit": cut,
        "wall_s": round(wall, 1),
        "wall_per_unit_s": round(wall / n, 1) if n else None,
        "wall_per_100_words_s": _per_100(wall, text),
        "first_100_words": " ".join(text.split()[:100]),
    }


def _per_100(wall: float, text: str) -> float | None:
    """Wall time per 100 words written: a profile whose steps write more per step is not slower
    per step for that reason alone, so time is also reported per word."""
    words = len(text.split())
    return round(wall * 100 / words, 1) if words else None


def verdicts(rows: list[dict[str, Any]]) -> list[str]:
    by = {(r["pipeline"], r["profile"]): r for r in rows}
    out = []
    magnet = by.get(("magnet", "small"))
    if magnet:
        out.append(_mark("Magnet small: repeated-4-gram rate <= 0.10", (magnet["repeated_4gram_rate"] or 0) <= 0.10))
        out.append(_mark("Magnet small: distinct-3 >= 0.70", (magnet["distinct_3"] or 0) >= 0.70))
        out.append(_mark("Magnet small: failed calls per step <= 1", (magnet["failed_per_unit"] or 0) <= 1))
    nst = by.get(("nst", "small"))
    if nst:
        out.append(_mark("NstAgent small: first-attempt gate pass > 0", nst["first_attempt_pass"] > 0))
        out.append(_mark("NstAgent small: no chapter degraded at the token limit", nst["degraded_token_limit"] == 0))
    for pipeline in ("magnet", "nst"):
        base, small = by.get((pipeline, "default")), by.get((pipeline, "small"))
        if base and small and base["wall_per_unit_s"] and small["wall_per_unit_s"]:
            ratio = small["wall_per_unit_s"] / base["wall_per_unit_s"]
            out.append(_mark(f"{pipeline}: time per unit small/default = {ratio:.2f} <= 1.2", ratio <= 1.2))
        if base and small and base["wall_per_100_words_s"] and small["wall_per_100_words_s"]:
            ratio = small["wall_per_100_words_s"] / base["wall_per_100_words_s"]
            out.append(_mark(f"{pipeline}: time per 100 words small/default = {ratio:.2f} <= 1.2", ratio <= 1.2))
    return out


def _mark(text: str, ok: bool) -> str:
    return f"{'met   ' if ok else 'MISSED'} {text}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--magnet-words", type=int, default=200)
    parser.add_argument("--nst-words", type=int, default=1000)
    parser.add_argument(
        "--nst-max-turns",
        type=int,
        default=8,
        help="turns per chapter, both profiles (the paper's 50 lets a default-profile chapter "
        "on the tiny model run for hours: every draft runs to its token limit)",
    )
    parser.add_argument("--skip-nst", action="store_true")
    parser.add_argument("--skip-magnet", action="store_true")
    parser.add_argument(
        "--profiles",
        default="default,small",
        help="profiles in the order they run (default: default,small); each row prints as it ends",
    )
    parser.add_argument("--keep", metavar="DIR", help="keep the runs in DIR (default: a temporary folder)")
    parser.add_argument(
        "--engine",
        default="auto",
        choices=("auto", "llama.cpp", "transformers"),
        help="the embedded engine (#27: run once with each to compare them)",
    )
    args = parser.parse_args()
    unknown = set(args.profiles.split(",")) - {"default", "small"}
    if unknown:
        parser.error(f"--profiles: unknown profile(s) {', '.join(sorted(unknown))}; use default and/or small")
    llm = pipelines.LLMOptions(backend="embedded", engine=args.engine)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for profile in args.profiles.split(","):
            if not args.skip_magnet:
                rows.append(magnet_run(folder, profile, args.magnet_words, llm))
                print(json.dumps(rows[-1]), flush=True)
            if not args.skip_nst:
                rows.append(nst_run(folder, profile, args.nst_words, llm, args.nst_max_turns))
                print(json.dumps(rows[-1]), flush=True)
    print()
    cols = (
        "pipeline",
        "profile",
        "units",
        "words",
        "repeated_4gram_rate",
        "distinct_3",
        "failed_per_unit",
        "first_attempt_pass",
        "degraded_token_limit",
        "wall_per_unit_s",
        "wall_per_100_words_s",
    )
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(f"{r.get(c):.2f}" if isinstance(r.get(c), float) else str(r.get(c, "-")) for c in cols))
    print()
    for line in verdicts(rows):
        print(line)
    out = ROOT / "bench-results" / "bench_small.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"runs": rows, "verdicts": verdicts(rows)}, indent=2))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
