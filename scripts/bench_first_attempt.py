"""First-attempt gate pass on the embedded tiny model, with and without the ``min_tokens`` floor (issue 13).

The floor (not in the paper) asks the backend for at least 90 % of the bottom of the range in
tokens; Direct now runs without it by default, as the reference does. This drafts the same
chapter requests with the shared ``Drafter`` both ways and reports how many first drafts land
in the ±20 % gate.

    .venv/bin/python scripts/bench_first_attempt.py [--targets 150,250,350] [--repeats 2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.gate import Gate
from agent.limits import LATIN_TOKENS_PER_WORD
from agent.nst.chapter.drafter import Drafter

PROMPT = "A fisherman finds a talking fish that grants one wish."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="150,250,350")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    from agent.llm.embedded import EmbeddedLLM

    llm = EmbeddedLLM()
    for use_min in (True, False):
        passed = total = 0
        words = []
        for target in (int(t) for t in args.targets.split(",")):
            gate = Gate.for_target(target)
            for repeat in range(args.repeats):
                drafter = Drafter(
                    llm, gate, LATIN_TOKENS_PER_WORD, temperature=0.7, cap=32768, use_min=use_min, role="bench"
                )
                messages = [
                    {"role": "system", "content": "You are a novelist."},
                    {
                        "role": "user",
                        "content": f"# Story prompt\n{PROMPT}\n\nWrite chapter {repeat + 1}. "
                        f"Length: {gate.describe()}. Reply with the chapter's prose only.",
                    },
                ]
                attempt = drafter.attempt(messages)
                passed += attempt.accepted
                total += 1
                words.append((target, attempt.words, attempt.truncated))
        print(
            f"min_tokens floor {'on ' if use_min else 'off'}: first-attempt gate pass {passed}/{total}; "
            f"(target, words, cut): {words}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
