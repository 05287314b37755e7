"""Does the writer have the facts a chapter needs? Context recall of NstAgent, RollSum and Direct (#28 item 4).

The real pipelines (NstAgent's planner, chapter loop, state, tools, budget and store; RollSum's
chapters and summaries; Direct's one call) run to 10K-100K words (fixed chapter length, 2,500
words by default) in 8K, 16K and 32K contexts, budgeting and counted with the long-haul bench's
two real tokenizers (SmolLM2's 49K vocabulary and Qwen's 151K). The scripted author
(``scripts/recall_author.py``, the long-haul bench's capable author plus facts) plants one fact
a chapter (an eye colour, a debt, a promise, a secret: ``scripts/recall_facts.py``) in the prose
and in its state update, and needs each again 1, 3, 8 and 20 chapters later; in a chapter that
needs a fact it lacks, it searches and reads as NstAgent's tools allow.

A need is recalled when the fact's distinguishing string is in the prompt the writer gets when
it writes the chapter that needs it (NstAgent: the request of the chapter's last draft, with its
state, digests, search and read results; RollSum: the chapter request with its summary; Direct:
its prompt and its own story up to that chapter's heading). It is attributed to the first
section that holds it (``scripts/recall_measure.py``). Needs of chapters a run never wrote count
as needed and not recalled. RollSum's and the digests' rewrites lose a fact by paraphrase with
probability ``--drift`` per rewrite (an assumption of the scripted author, not a measurement).

    .venv/bin/python scripts/bench_recall.py [--words 10000,50000,100000] [--contexts 8192,16384,32768]
        [--methods nst,nst-paper,rollsum,direct] [--tokenizers smollm2,qwen] [--chapter-words 2500]
        [--drift 0.03] [--json bench-results/bench_recall.json]

Goal: at 100K words in a 16K context, NstAgent (default profile) has >= 95 % of the needed facts
in the prompt where it needs them, with each tokenizer.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import product
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.errors import FabulaError
from agent.nst import runner
from agent.nst.baselines import direct, rollsum
from agent.nst.config import DIRECT_DEFAULTS, NST_DEFAULTS, ROLLSUM_DEFAULTS, DirectConfig, NstConfig, RollSumConfig
from agent.nst.plan import fit as fit_chapters
from agent.nst.plan import planner
from agent.quotes import normalize
from agent.store import RunStore
from agent.testing.author import chapter_of
from scripts.bench_longhaul import PROMPT, QwenChat, ids_of, smollm2
from scripts.recall_author import RecallAuthor
from scripts.recall_facts import script
from scripts.recall_measure import SOURCES, Section, message_sections, tally

METHODS: dict[str, tuple[str, str]] = {
    "nst": ("nst", "default"),
    "nst-paper": ("nst", "paper"),
    "rollsum": ("rollsum", "default"),
    "direct": ("direct", "default"),
}
"""--methods name -> (pipeline, profile)."""
PIPELINES = {
    "nst": (runner.write_story, NstConfig, NST_DEFAULTS, "nst_prose"),
    "rollsum": (rollsum.write_story, RollSumConfig, ROLLSUM_DEFAULTS, "rollsum_chapter"),
    "direct": (direct.write_story, DirectConfig, DIRECT_DEFAULTS, "direct_story"),
}
GOAL = 0.95


@contextmanager
def fixed_chapters(chapter_words: int) -> Iterator[None]:
    """The planner plans chapters of ``chapter_words`` (as the long-haul bench), and the rule that
    fits chapters to a small context starts from that count (``agent.nst.plan.fit``)."""
    paper = planner.chapter_count
    planner.chapter_count = fit_chapters.chapter_count = lambda total: max(2, round(total / chapter_words))
    try:
        yield
    finally:
        planner.chapter_count = fit_chapters.chapter_count = paper


def writer_prompts(pipeline: str, author: RecallAuthor, store: RunStore) -> dict[int, list[Section]]:
    """Chapter -> the sections of the prompt its writer had (the chapter's last prose request;
    Direct: its prompt and its own text before the chapter's heading)."""
    role = PIPELINES[pipeline][3]
    requests = [r for r in author.requests if r.role == role]
    if pipeline != "direct":
        return {chapter_of(r): message_sections(r.messages) for r in requests}
    kept = store.chapters()
    if not kept or not requests:
        return {}
    text, base = kept[0].text, message_sections(requests[0].messages)
    prompts = {}
    for k in range(1, len(author.facts) + 2):
        heading = re.search(rf"(?:^|\s)Chapter {k}(?=\s)", text)
        if heading is not None:
            prompts[k] = [*base, ("own_text", text[: heading.start()])]
    return prompts


def chapter_messages(author: RecallAuthor) -> dict[int, str]:
    """Chapter -> every distinct message of the chapter's requests, normalised (what its turns saw)."""
    seen: dict[int, dict[str, None]] = {}
    for request in author.requests:
        chapter = chapter_of(request)
        if chapter:
            seen.setdefault(chapter, {}).update(dict.fromkeys(m["content"] for m in request.messages[2:]))
    return {chapter: normalize("\n".join(messages)) for chapter, messages in seen.items()}


def run_one(
    method: str,
    words: int,
    context: int,
    tokenizer: Any,
    name: str,
    chapter_words: int,
    drift: float,
    workdir: Path,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One run of ``method`` and its recall; ``settings`` override the profile's (as ``--set`` does)."""
    pipeline, profile = METHODS[method]
    write_story, typed, defaults, role = PIPELINES[pipeline]
    config = {
        **defaults,
        **({} if profile == "default" else typed.profile_settings(profile)),
        **(settings or {}),
        "prompt": PROMPT,
        "prompt_id": f"recall-{chapter_words}",
        "words": words,
        "context_tokens": context,
        "llm": {"backend": "scripted", "model": name},
    }
    if pipeline != "direct":
        config["plan_cache"] = str(workdir / f"plans-{name}")
    tag = "".join(f"-{k}={v}" for k, v in (settings or {}).items())
    store = RunStore.create(workdir / f"run-{method}-{name}-{context}-{words}{tag}", pipeline=pipeline, config=config)
    chapters = max(2, round(words / chapter_words))
    author = RecallAuthor(tokenizer, name, drift=drift, chapters=chapters if pipeline == "direct" else None)
    author.recorders.append(store.ledger.recorder)
    started, error = time.monotonic(), None
    try:
        with fixed_chapters(chapter_words), store.sessions.hold("start"):
            write_story(store, author, typed.coerce(config))
    except FabulaError as exc:  # a run the context stops: its unwritten chapters recall nothing
        error = " ".join(str(exc).split())[:160]
    outline = store.plans.all().get("outline") or []
    facts = author.facts or script(len(outline) or chapters)
    prompts = writer_prompts(pipeline, author, store)
    counted = tally(facts, prompts, chapter_messages(author))
    peak = max(
        (len(ids_of(tokenizer, r.messages)) + r.max_tokens for r in author.requests if r.role == role), default=0
    )
    actions: dict[str, int] = {}
    for call in store.ledger.tool_calls():
        if call.tool == "budget":
            actions[call.arguments["action"]] = actions.get(call.arguments["action"], 0) + 1
    result = {
        "method": pipeline,
        "profile": profile,
        "words": words,
        "context": context,
        "tokenizer": name,
        "needed": counted.needed,
        "recalled": counted.recalled,
        "recall": round(counted.recall, 4),
        "by_source": {s: counted.by_source[s] for s in SOURCES if s in counted.by_source},
        "by_kind": counted.by_kind,
        "unwritten": counted.unwritten,
        "dropped": counted.dropped,
        "chapters": len(store.chapters()),
        "planned_chapters": len(outline) or chapters,
        "peak_writer_request": peak,
        "budget_actions": actions,
        "status": store.info().status,
        "error": error,
        "drift": drift,
        "seconds": round(time.monotonic() - started, 1),
    }
    store.close()
    return result


def print_table(runs: list[dict[str, Any]]) -> None:
    print(
        f"{'method':<8} {'profile':<7} {'tokenizer':<9} {'context':>7} {'words':>7} {'chap':>5} {'needed':>6} "
        f"{'recalled':>8} {'recall':>6}  by source"
    )
    for r in runs:
        sources = ", ".join(f"{k} {v}" for k, v in r["by_source"].items()) or "none"
        unwritten = f"; {r['unwritten']} in unwritten chapters" if r["unwritten"] else ""
        unwritten += f"; {r['dropped']} found, then dropped" if r["dropped"] else ""
        print(
            f"{r['method']:<8} {r['profile']:<7} {r['tokenizer']:<9} {r['context']:>7} {r['words']:>7} "
            f"{r['chapters']:>5} {r['needed']:>6} {r['recalled']:>8} {r['recall']:>6.3f}  {sources}{unwritten}"
        )


def goal_lines(runs: list[dict[str, Any]]) -> list[str]:
    """The goal's verdict for every default-profile NstAgent run at 100K words in a 16K context."""
    lines = []
    for r in runs:
        if (r["method"], r["profile"], r["words"], r["context"]) == ("nst", "default", 100_000, 16384):
            verdict = "met" if r["recall"] >= GOAL else "MISSED"
            lines.append(f"goal (NstAgent >= {GOAL:.2f} at 100K/16K, {r['tokenizer']}): {r['recall']:.3f} {verdict}")
    return lines


def grid(args: argparse.Namespace) -> Iterator[tuple[str, Any, int, int, str]]:
    """(tokenizer name, tokenizer, context, words, method) for every run the flags ask for."""

    def numbers(text: str) -> list[int]:
        return [int(n) for n in text.split(",")]

    for name in args.tokenizers.split(","):
        tokenizer = {"smollm2": smollm2, "qwen": QwenChat}[name]()
        for context, words, method in product(numbers(args.contexts), numbers(args.words), args.methods.split(",")):
            yield name, tokenizer, context, words, method


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", default="10000,50000,100000")
    parser.add_argument("--contexts", default="8192,16384,32768")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--tokenizers", default="smollm2,qwen")
    parser.add_argument("--chapter-words", type=int, default=2500)
    parser.add_argument("--drift", type=float, default=0.03, help="chance a rewrite paraphrases a fact away")
    parser.add_argument("--json", metavar="FILE", help="write {'runs': [...]} to FILE")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, tokenizer, context, words, method in grid(args):
            run = run_one(method, words, context, tokenizer, name, args.chapter_words, args.drift, Path(tmp))
            runs.append(run)
            failed = f"; {run['error']}" if run["error"] else ""
            print(
                f"  {method} {name} ctx {context} {words} words: recall {run['recall']:.3f}, {run['seconds']} s"
                f"{failed}",
                file=sys.stderr,
                flush=True,
            )
    print_table(runs)
    verdicts = goal_lines(runs)
    for line in verdicts:
        print(line)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"runs": runs}, indent=1))
    return 1 if any(line.endswith("MISSED") for line in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
