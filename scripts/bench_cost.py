"""Does NstAgent's prompt cost stay linear in the story length? (issue 4, "Benchmark: cost stays linear")

Runs the real chapter loop (planner cache, state, tools, gate, store) at 10K, 20K, 50K and 100K
words with a deterministic scripted model (``agent/testing/author.py``) that writes chapters of the
target length and state updates of realistic size: 4 past events per chapter, 3 snapshots per
update out of a cast that grows from 6 to 12, and about three open requirements. Every prompt
is rendered with the tiny model's chat template and counted with its real tokenizer.

For each prompt, the cache-eligible tokens are the longest prefix, in whole 16-token blocks,
shared with any earlier prompt of the run (what vLLM's prefix cache can reuse); the rest is
recomputed. Prints per-length totals and per-chapter curves, and writes a PNG plot.

    .venv/bin/python scripts/bench_cost.py [--lengths 10000,20000,50000,100000] [--png bench_cost.png]
        [--chapter-words 1000]   # also hold chapter length fixed, to separate its effect from story length
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_results import write_results  # scripts/ is on sys.path when a script runs

from agent.nst import runner
from agent.nst.config import NST_DEFAULTS
from agent.nst.plan import planner
from agent.store import RunStore
from agent.testing.author import Author, chapter_of, open_requirements, update_json

BLOCK = 16
PROMPT = (
    "Write a novel about a lighthouse keeper on a remote northern island who discovers that the bell in the "
    "tower rings only for ships that sank a century ago, and must decide whether to answer it."
)


class BenchAuthor(Author):
    """Outlines with realistic descriptions; updates of realistic size; writes then updates then finishes."""

    def __init__(self) -> None:
        super().__init__(policy=self.policy_fn, tokens_per_word=1.3)

    @staticmethod
    def policy_fn(request, tools):
        chapter = chapter_of(request)
        if "write" in tools:
            return json.dumps({"tool": "write", "title": f"The bell, part {chapter}"})
        if "update" in tools:
            keys = open_requirements(request)
            return update_json(
                chapter,
                events=4,
                characters=3,
                cast=min(12, 6 + chapter // 4),
                resolve=keys[:1] if len(keys) >= 3 else [],
            )
        return json.dumps({"tool": "finish"})

    def reply(self, request):
        if request.role == "plan_outline":
            data = json.loads(super().reply(request)[0])
            for c in data["chapters"]:
                c["description"] = (
                    f"In part {c['id']} the keeper follows the bell's call to another wreck, meets "
                    "the families of the drowned, and learns one more piece of the island's secret "
                    "while the storm season closes in and the harbour master grows suspicious."
                )
            return json.dumps(data), "stop"
        return super().reply(request)


def run_length(words: int, tokenizer, workdir: Path, chapter_words: int | None = None) -> dict:
    """One story of ``words``; chapters as the planner sizes them, or of ``chapter_words`` each."""
    config = {
        **NST_DEFAULTS,
        "prompt": PROMPT,
        "prompt_id": f"bench-{chapter_words or 'anchors'}",
        "words": words,
        "plan_cache": str(workdir / "plans"),
        "llm": {"backend": "scripted", "model": "bench"},
    }
    store = RunStore.create(workdir / f"run-{words}-{chapter_words or 'anchors'}", pipeline="nst", config=config)
    author = BenchAuthor()
    paper_count = planner.chapter_count
    if chapter_words:  # the experiment holds chapter length fixed; the pipeline itself is unchanged
        planner.chapter_count = lambda total: max(2, round(total / chapter_words))
    try:
        with store.sessions.hold("start"):
            runner.write_story(store, author, config)
    finally:
        planner.chapter_count = paper_count
    seen: set[bytes] = set()
    per_chapter: dict[int, dict[str, int]] = {}
    for request in author.requests:
        text = tokenizer.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        eligible, chain, still = 0, hashlib.sha256(), True
        for start in range(0, len(ids) - len(ids) % BLOCK, BLOCK):
            chain.update(struct.pack(f"{BLOCK}i", *ids[start : start + BLOCK]))
            digest = chain.copy().digest()
            if still and digest in seen:
                eligible += BLOCK
            else:
                still = False
            seen.add(digest)
        unit = chapter_of(request) if request.role and request.role.startswith("nst") else 0
        row = per_chapter.setdefault(unit, {"prompt": 0, "eligible": 0, "calls": 0})
        row["prompt"] += len(ids)
        row["eligible"] += eligible
        row["calls"] += 1
    chapters = store.chapters()
    written = sum(c.words for c in chapters)
    final = store.state()["narrative"]
    store.close()
    total = sum(r["prompt"] for r in per_chapter.values())
    eligible = sum(r["eligible"] for r in per_chapter.values())
    return {
        "words": words,
        "chapters": len(chapters),
        "written": written,
        "prompt_tokens": total,
        "eligible": eligible,
        "recomputed": total - eligible,
        "recomputed_per_1k": (total - eligible) / (written / 1000),
        "eligible_share": eligible / total,
        "recomputed_per_chapter": (total - eligible) / len(chapters),
        "state": {k: len(v) for k, v in final.items()},
        "per_chapter": {u: r for u, r in sorted(per_chapter.items()) if u},
    }


def write_png(path: Path, results: list[dict]) -> bool:
    """Recomputed prompt tokens per chapter, one line per length; False without matplotlib."""
    from agent.eval.plots import plots_available, png_plot

    if not plots_available():
        return False
    series = {
        f"{r['words'] // 1000}K words": [
            (i, c["prompt"] - c["eligible"]) for i, c in enumerate(r["per_chapter"].values(), start=1)
        ]
        for r in results
    }
    path.write_bytes(
        png_plot(
            series,
            title="Recomputed (not cache-eligible) prompt tokens per chapter",
            xlabel="chapter",
            ylabel="prompt tokens",
            lines=True,
        )
    )
    return True


def print_table(title: str, results: list[dict]) -> None:
    print(title)
    print(
        f"{'words':>7} {'chap':>4} {'written':>8} {'prompt tok':>11} {'eligible':>10} {'recomputed':>10} "
        f"{'recomp/1K w':>11} {'recomp/chap':>11} {'elig %':>6}  final state"
    )
    for r in results:
        print(
            f"{r['words']:>7} {r['chapters']:>4} {r['written']:>8} {r['prompt_tokens']:>11} {r['eligible']:>10} "
            f"{r['recomputed']:>10} {r['recomputed_per_1k']:>11.0f} {r['recomputed_per_chapter']:>11.0f} "
            f"{100 * r['eligible_share']:>5.1f}%  {r['state']}"
        )
    base = results[0]
    print(
        "relative to the first length: recomputed per 1K words "
        + ", ".join(f"{r['words']}: {r['recomputed_per_1k'] / base['recomputed_per_1k']:.2f}" for r in results)
        + "; recomputed per chapter "
        + ", ".join(
            f"{r['words']}: {r['recomputed_per_chapter'] / base['recomputed_per_chapter']:.2f}" for r in results
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="10000,20000,50000,100000")
    parser.add_argument("--png", default="bench_cost.png")
    parser.add_argument("--json", help="where to write every figure (default bench-results/bench_cost.json)")
    parser.add_argument(
        "--chapter-words",
        type=int,
        metavar="N",
        help="also run every length with chapters of N words each, to separate the effect of "
        "story length from that of chapter length",
    )
    args = parser.parse_args()
    from transformers import AutoTokenizer

    from agent.weights.models import ensure_embedded_model

    tokenizer = AutoTokenizer.from_pretrained(ensure_embedded_model().path)
    lengths = [int(w) for w in args.lengths.split(",")]
    results, fixed = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for words in lengths:
            results.append(run_length(words, tokenizer, Path(tmp)))
            if args.chapter_words:
                fixed.append(run_length(words, tokenizer, Path(tmp), chapter_words=args.chapter_words))
    print_table("chapter counts from the paper's anchors (10/15/25/40 at 10K/20K/50K/100K)", results)
    if fixed:
        print()
        print_table(f"every chapter {args.chapter_words} words (story length varies, chapter length does not)", fixed)
    print()
    for r in results:
        curve = [c["prompt"] - c["eligible"] for c in r["per_chapter"].values()]
        print(f"per-chapter recomputed tokens at {r['words']}: {curve}")
        share = [round(100 * c["eligible"] / c["prompt"]) for c in r["per_chapter"].values()]
        print(f"per-chapter cache-eligible % at {r['words']}: {share}")
    if write_png(Path(args.png), results):
        print(f"plot: {args.png} (recomputed prompt tokens per chapter, one line per length)")
    else:
        from agent.eval.plots import MISSING

        print(f"no plot: {MISSING}")
    write_results("bench_cost", {"anchors": results, "fixed_chapter_words": fixed}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
