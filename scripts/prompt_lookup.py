#!/usr/bin/env python3
"""How many forward passes prompt-lookup drafting would save on recorded runs (#35).

Prompt-lookup speculative decoding drafts a reply's next tokens from the longest earlier match of
its last ``--min-match``..4 tokens in the prompt and the reply so far, evaluates the drafts with
the next token in one forward pass, and keeps them while each sampled token equals its draft, so
every reply is what sampling alone writes. Replayed on each recorded embedded call (its prompt
rendered with the embedded model's chat template, its reply re-tokenized), this prints per role
the tokens, the passes drafting would need, the tokens a pass, and the drafted tokens thrown away
a pass (what a pass evaluates beyond one token it keeps). Nothing is decoded: the counts are exact
for the replies as written, the time a pass of several tokens costs is measured apart
(docs/design/embedded-speed.md, the seventh round).

    PYTHONPATH=$PWD python scripts/prompt_lookup.py RUN/run.db [RUN2/run.db ...] [--draft 6] [--min-match 1]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LONGEST_MATCH = 4


def draft(context: list[int], size: int, min_match: int) -> list[int]:
    """The ``size`` tokens that followed the latest earlier occurrence of the longest suffix of
    ``context`` (``LONGEST_MATCH`` tokens down to ``min_match``); none where no suffix recurs."""
    for n in range(LONGEST_MATCH, min_match - 1, -1):
        if len(context) <= n:
            continue
        tail = context[-n:]
        for start in range(len(context) - n - 1, -1, -1):
            if context[start : start + n] == tail:
                return context[start + n : start + n + size]
    return []


def passes(prompt: list[int], reply: list[int], size: int, min_match: int) -> tuple[int, int]:
    """Forward passes to write ``reply`` with drafts, and the drafted tokens they evaluated."""
    context, done, steps, drafted = list(prompt), 0, 0, 0
    while done < len(reply):
        guess = draft(context, size, min_match)
        kept = 0
        while kept < len(guess) and done + kept < len(reply) and guess[kept] == reply[done + kept]:
            kept += 1
        take = min(kept + 1, len(reply) - done)
        context += reply[done : done + take]
        done, steps, drafted = done + take, steps + 1, drafted + len(guess)
    return steps, drafted


def recorded(db: Path) -> list[tuple[str, list[dict[str, str]], str]]:
    """Each embedded call with a reply and no native tools: its role, messages and reply text
    (none from a run whose ledger kept its messages inline, before they were stored once each)."""
    with sqlite3.connect(db) as con:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'llm_messages'").fetchone():
            print(f"prompt_lookup: {db} keeps no message table (an older run): skipped", file=sys.stderr)
            return []
        stored = {h: (role, text) for h, role, text in con.execute("SELECT hash, role, content FROM llm_messages")}
        rows = con.execute(
            "SELECT role, messages, text FROM llm_calls WHERE backend = 'embedded' AND text IS NOT NULL "
            "AND tools IS NULL ORDER BY id"
        ).fetchall()
    return [
        (role, [{"role": stored[h][0], "content": stored[h][1]} for h in json.loads(hashes)], text)
        for role, hashes, text in rows
    ]


def main() -> int:
    from agent.llm.embedded_engines import open_embedded

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--draft", type=int, default=6, help="the most tokens drafted a pass")
    parser.add_argument("--min-match", type=int, default=1, help="the shortest suffix a draft follows")
    args = parser.parse_args()
    llm = open_embedded(engine="llama.cpp")
    template = llm.token_counter()
    if template is None or not hasattr(template, "ids"):
        raise SystemExit("prompt_lookup: the embedded engine has no chat template here")
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for db in args.runs:
        for role, messages, text in recorded(db):
            prompt = template.ids(messages, None)
            reply = llm._llama.tokenize(text.encode(), add_bos=False, special=False)  # type: ignore[attr-defined]
            steps, drafted = passes(prompt, reply, args.draft, args.min_match)
            for i, value in enumerate((1, len(reply), steps, drafted)):
                totals[role][i] += value
    matches = f"{args.min_match}-{LONGEST_MATCH}"
    print(f"drafts of up to {args.draft} tokens after a match of {matches}, {len(args.runs)} runs")
    for role, (calls, tokens, steps, drafted) in sorted(totals.items()):
        wasted = (drafted - (tokens - steps)) / max(steps, 1)
        print(
            f"{role:16s} calls {calls:5d}  tokens {tokens:7d}  passes {steps:7d}  "
            f"tokens a pass {tokens / max(steps, 1):.2f}  drafts thrown away a pass {wasted:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
