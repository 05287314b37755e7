"""How many prompt tokens a run's requests leave to compute behind a prefix cache, role by role,
for request dumps side by side (#35: the prompts' order decides what a cache reuses).

    PYTHONPATH=$PWD python scripts/dump_prompts.py BEFORE.jsonl --profile small   # on the old revision
    PYTHONPATH=$PWD python scripts/dump_prompts.py AFTER.jsonl --profile small
    PYTHONPATH=$PWD python scripts/prefix_reuse.py BEFORE.jsonl AFTER.jsonl [--pipeline magnet]

Each request is laid out with the embedded model's chat template (its HF folder's tokenizer) and
finds cached the longest prefix it shares with any earlier request of the same pipeline: vLLM's
automatic prefix cache with room for the whole run. The embedded llama.cpp engine keeps the live
cache and a few saved ones, so it reuses at most this much. Prints, per role, the prompt tokens and
those left to compute in each file, and their totals.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _common(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def reuse(rows: list[dict[str, Any]], tokenize: Any) -> dict[tuple[str, str], list[int]]:
    """``(pipeline, role) -> [requests, prompt tokens, tokens to compute]`` over ``rows`` in order."""
    seen: dict[str, list[list[int]]] = defaultdict(list)
    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for row in rows:
        ids = tokenize(row["messages"])
        earlier = seen[row["pipeline"]]
        cached = max((_common(ids, e) for e in earlier), default=0)
        sums = out[(row["pipeline"], row["role"])]
        sums[0] += 1
        sums[1] += len(ids)
        sums[2] += len(ids) - min(cached, len(ids) - 1)  # the last prompt token is always computed
        earlier.append(ids)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dumps", nargs="+", type=Path, help="scripts/dump_prompts.py outputs")
    parser.add_argument("--pipeline", default=None, help="only this pipeline's requests (e.g. magnet)")
    args = parser.parse_args()
    import transformers

    from agent.weights.models import ensure_embedded_model

    tokenizer = transformers.AutoTokenizer.from_pretrained(ensure_embedded_model().path)

    def tokenize(messages: list[dict[str, Any]]) -> list[int]:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    tables = []
    for dump in args.dumps:
        try:
            rows = [json.loads(line) for line in dump.read_text(encoding="utf-8").splitlines() if line.strip()]
            if not all(isinstance(r, dict) and {"pipeline", "role", "messages"} <= r.keys() for r in rows):
                raise ValueError("a line is not a request of scripts/dump_prompts.py")
        except (OSError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
            sys.exit(f"prefix_reuse: {dump}: {exc}")
        if args.pipeline:
            rows = [r for r in rows if r["pipeline"] == args.pipeline]
        tables.append(reuse(rows, tokenize))
    keys = sorted({k for t in tables for k in t})
    names = [d.name for d in args.dumps]
    print(f"{'pipeline':14s} {'role':16s} {'requests':>8s} " + " ".join(f"{n[:24]:>24s}" for n in names))
    print(f"{'':14s} {'':16s} {'':>8s} " + " ".join(f"{'prompt / to compute':>24s}" for _ in names))
    totals = [[0, 0] for _ in names]
    for key in keys:
        cells = []
        for i, table in enumerate(tables):
            _, prompt, compute = table.get(key, [0, 0, 0])
            totals[i][0] += prompt
            totals[i][1] += compute
            cells.append(f"{prompt:>11d} / {compute:>10d}")
        count = max(t.get(key, [0])[0] for t in tables)
        print(f"{key[0]:14s} {key[1]:16s} {count:>8d} " + " ".join(cells))
    print(f"{'total':14s} {'':16s} {'':>8s} " + " ".join(f"{p:>11d} / {c:>10d}" for p, c in totals))
    if len(totals) > 1 and totals[0][1]:
        print(
            "to compute, "
            + " / ".join(names[1:])
            + f" against {names[0]}: "
            + ", ".join(f"{t[1] / totals[0][1]:.2f}" for t in totals[1:])
        )


if __name__ == "__main__":
    main()
