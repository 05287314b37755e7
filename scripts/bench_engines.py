#!/usr/bin/env python3
"""The embedded engines side by side with llama.cpp and vLLM, against the memory-bandwidth limit.

One run, same model (SmolLM2-135M-Instruct: the Q4_1 GGUF and the HF folder converted from it),
same prompts, every engine loaded at once and measured in turn, round after round (each figure
is the median over ``--rounds``), so drift on a noisy machine hits all of them alike:

- ``embedded``: fabula's embedded backend as it opens by default (llama.cpp on the GGUF);
- ``embedded-previous``: the engine it replaces (transformers + Outlines on the HF folder);
- ``llamacpp``: llama-cpp-python in process, its own API and its own JSON-schema grammar;
- ``llamacpp-server``: llama-cpp-python's OpenAI server, through fabula's endpoint backend;
- ``vllm-cpu``: ``fabula serve --preset tiny-cpu``, through fabula's endpoint backend
  (minutes to start; ``--skip vllm-cpu`` leaves it out).

Figures: prefill tokens/s (a ~1,500-token prompt nobody has seen), decode tokens/s plain, under a
JSON schema (fabula's own state-update grammar) and under a regex, time to first token, and the
share of prompt tokens recomputed over a real NstAgent prompt sequence (a scripted run's requests
for three chapters, replayed in order). The streaming-copy bandwidth of this machine over the
GGUF's size gives the decode limit; each engine's decode is printed as a share of it.

The cases real runs have (#35), in a second table: decode on a cached prompt of ``--context``
tokens (6,000: a chapter turn late in a small run) under the state-update schema and under a
turn's union of tools (the union offered after a chapter is written), and a schema the engine has
never seen (a new union, as each chapter's narrowed tools are) timed on its first call and again,
with the compile share of the first where the engine reports its time split.

    .venv/bin/python scripts/bench_engines.py [--rounds 3] [--skip vllm-cpu] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_results import write_results  # noqa: E402

from agent.llm.embedded_llamacpp import default_threads  # noqa: E402
from agent.testing.ports import free_port  # noqa: E402

ENGINES = ("embedded", "embedded-previous", "llamacpp", "llamacpp-server", "vllm-cpu")
DECODE_TOKENS = 128
CONTEXT = 6000
"""Tokens of cached prompt in the real-run cases: a chapter turn late in a small run."""
REGEX = r"[A-Z][a-z]+( [a-z]+){40,80}\."
STORY = [{"role": "user", "content": "Tell me a long story about a lighthouse keeper and a storm."}]


def bandwidth_gbs(mib: int = 256, repeats: int = 5) -> float:
    """This machine's streaming-copy bandwidth (read + write), best of ``repeats``."""
    import numpy as np

    src = np.ones(mib * 2**20 // 8)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / best / 1e9


def fresh(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The same request with a new first line, so no cache holds any of it (one system message:
    the LLM layer refuses two)."""
    line = f"Session {uuid.uuid4().hex}."
    if messages and messages[0]["role"] == "system":
        return [{"role": "system", "content": f"{line} {messages[0]['content']}"}, *messages[1:]]
    return [{"role": "system", "content": line}, *messages]


def long_prompt() -> list[dict[str, str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [{"role": "user", "content": "Summarise this page:\n\n" + text[:6000]}]


def chapter_prompts() -> list[list[dict[str, str]]]:
    """The requests of a scripted NstAgent run of three chapters, in order (planner excluded)."""
    from agent import pipelines
    from agent.llm.base import LLM
    from agent.testing.author import Author

    seen: list[list[dict[str, str]]] = []
    original = LLM._prepare

    def record(self: LLM, request: Any) -> Any:
        prepared = original(self, request)
        if not str(prepared.role or "").startswith("plan"):
            seen.append(prepared.messages)
        return prepared

    home = tempfile.mkdtemp(prefix="fabula-bench-engines-")
    os.environ["FABULA_HOME"] = home
    LLM._prepare = record  # type: ignore[method-assign]
    try:
        config = {"prompt": "A keeper finds a bell in the harbour.", "prompt_id": None, "words": 3000}
        store = pipelines.start(
            Path(home) / "nst",
            "nst",
            config,
            pipelines.LLMOptions(backend="scripted", model="scripted"),
            model=Author(),
        )
        store.close()
    finally:
        LLM._prepare = original  # type: ignore[method-assign]
        os.environ.pop("FABULA_HOME", None)
    return seen


class FabulaEngine:
    """An engine behind fabula's LLM layer (the one call shape)."""

    def __init__(self, name: str, llm: Any, *, server: subprocess.Popen | None = None) -> None:
        self.name, self.llm, self.server = name, llm, server
        self.last: Any = None
        self.backend = f"{llm.backend}/{getattr(llm, 'engine', llm.backend)}"
        path = getattr(llm, "path", None)
        self.weights = _weights_bytes(Path(path)) if path else None

    def call(
        self, messages: list[dict[str, str]], max_tokens: int, output_type: Any = None, temperature: float = 0.0
    ) -> tuple[float, int, int, int]:
        """Wall time and token counts of one call, read from the call's record, so a reply cut at
        ``max_tokens`` (refused by the LLM layer) still counts the tokens it decoded. The record
        stays in :attr:`last` (its ``timing`` says where an in-process engine's time went)."""
        from agent.llm import LLMError

        records: list[Any] = []
        self.llm.recorders.append(records.append)
        start = time.perf_counter()
        try:
            self.llm.generate(messages, output_type, temperature=temperature, max_tokens=max_tokens, seed=1)
        except LLMError:
            pass
        finally:
            self.llm.recorders.remove(records.append)
        took = time.perf_counter() - start
        last = self.last = records[0]  # the first attempt (a looped structured reply is asked once more)
        return (
            took if len(records) == 1 else last.latency_s,
            last.prompt_tokens,
            last.cached_prompt_tokens,
            last.completion_tokens,
        )

    def close(self) -> None:
        self.llm.close()
        if self.server is not None:
            self.server.terminate()
            self.server.wait(timeout=60)


class RawLlamaCpp:
    """llama-cpp-python's own chat API in process (its own grammar for JSON; no regex API)."""

    backend = "llama-cpp-python"

    def __init__(self, gguf: Path) -> None:
        import llama_cpp

        self.name = "llamacpp"
        self.weights = gguf.stat().st_size
        threads = default_threads()
        self.llama = llama_cpp.Llama(str(gguf), n_ctx=8192, n_threads=threads, n_threads_batch=threads, verbose=False)

    def call(
        self, messages: list[dict[str, str]], max_tokens: int, output_type: Any = None, temperature: float = 0.0
    ) -> tuple[float, int, int, int]:
        from agent.llm.constraints import to_constraint

        kwargs: dict[str, Any] = {}
        if output_type is not None:
            constraint = to_constraint(output_type)
            if constraint.kind != "json":
                raise NotImplementedError("llama-cpp-python has no regex constraint")
            kwargs["response_format"] = {"type": "json_object", "schema": constraint.json_schema}
        start = time.perf_counter()
        reply = self.llama.create_chat_completion(
            messages, max_tokens=max_tokens, temperature=temperature, seed=1, **kwargs
        )
        took = time.perf_counter() - start
        usage = reply["usage"]
        return took, usage["prompt_tokens"], 0, usage["completion_tokens"]  # it reports no reused tokens

    def close(self) -> None:
        self.llama.close()


def _weights_bytes(path: Path) -> int:
    """The bytes of weights a decode step reads: the GGUF, or an HF folder's safetensors."""
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.glob("*.safetensors"))


def open_engines(skip: set[str]) -> list[Any]:
    from agent.llm.embedded import EmbeddedLLM
    from agent.llm.embedded_engines import open_embedded
    from agent.weights.models import ensure_gguf

    engines: list[Any] = []
    if "embedded" not in skip:
        engines.append(FabulaEngine("embedded", open_embedded()))
    if "embedded-previous" not in skip:
        engines.append(FabulaEngine("embedded-previous", EmbeddedLLM()))
    if "llamacpp" not in skip:
        engines.append(RawLlamaCpp(ensure_gguf()))
    if "llamacpp-server" not in skip:
        engines.append(_llamacpp_server(ensure_gguf()))
    if "vllm-cpu" not in skip:
        engines.append(_vllm_server())
    return engines


def _wait_ready(url: str, process: subprocess.Popen, timeout_s: float) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode})")
        try:
            with urllib.request.urlopen(url + "/models", timeout=5):
                return
        except OSError:
            time.sleep(1)
    process.kill()
    raise RuntimeError(f"no server at {url} after {timeout_s:.0f} s")


def _llamacpp_server(gguf: Path) -> FabulaEngine:
    from agent.llm.endpoint import EndpointLLM
    from serve.llamacpp import llamacpp_command

    port = free_port()
    threads = default_threads()
    process = subprocess.Popen(
        llamacpp_command(gguf, port, n_ctx=8192, threads=threads), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/v1"
    _wait_ready(url, process, 120)
    engine = FabulaEngine("llamacpp-server", EndpointLLM(url, probe="full"), server=process)
    engine.weights = gguf.stat().st_size
    return engine


def _vllm_server() -> FabulaEngine:
    from agent.llm.endpoint import EndpointLLM

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agent.cli", "serve", "--preset", "tiny-cpu", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1"
    _wait_ready(url, process, 900)
    from agent.weights.models import embedded_model_dir

    engine = FabulaEngine("vllm-cpu", EndpointLLM(url, probe="full"), server=process)
    engine.weights = _weights_bytes(embedded_model_dir())  # the folder it loads (in the preset's dtype)
    return engine


def measure_round(engine: Any, schema: Any) -> dict[str, float | None]:
    """One round of every figure for one engine."""
    from agent.llm import Regex

    out: dict[str, float | None] = {}
    took, prompt, _, _ = engine.call(fresh(long_prompt()), 1)
    out["prefill_tps"] = prompt / took
    out["ttft_s"], _, _, _ = engine.call(fresh(STORY), 1)
    took, _, _, completion = engine.call(fresh(STORY), DECODE_TOKENS)
    out["decode_tps"] = max(completion - 1, 1) / max(took - out["ttft_s"], 1e-6)
    took, _, _, completion = engine.call(fresh(ASK_STATE), 384, schema, temperature=0.7)
    out["decode_json_tps"] = max(completion - 1, 1) / max(took - out["ttft_s"], 1e-6)
    try:
        took, _, _, completion = engine.call(fresh(STORY), 160, Regex(REGEX), temperature=0.7)
        out["decode_regex_tps"] = max(completion - 1, 1) / max(took - out["ttft_s"], 1e-6)
    except Exception as exc:  # an engine without regex constraints (llama-cpp-python's own API)
        print(f"  {engine.name}: no regex decode ({type(exc).__name__}: {str(exc)[:80]})", file=sys.stderr)
        out["decode_regex_tps"] = None
    return out


ASK_STATE = [
    {"role": "system", "content": "You track a story's state and answer in JSON."},
    {
        "role": "user",
        "content": "Chapter 1: Mara, the keeper, finds a bronze bell in the harbour at dawn. "
        "She hides it from the harbour master, Tomas. Record the state update.",
    },
]


def context_messages(tokens: int, count: Any) -> list[dict[str, str]]:
    """An update request whose prompt is about ``tokens`` tokens long (this page's README as the
    chapter text); ``count(messages)`` is the prompt's length in the model's tokens."""
    text = (ROOT / "README.md").read_text(encoding="utf-8") * (1 + tokens // 1500)
    ask = {"role": "user", "content": "Record what happened in this chapter as a state update."}
    whole = count([{"role": "system", "content": text}, ask])
    chars = int(len(text) * min(1.0, (tokens - 40) / whole))
    return [{"role": "system", "content": text[:chars]}, ask]


def template_count() -> Any:
    """Counts a request's prompt tokens with the model's own tokenizer and chat template."""
    import transformers

    from agent.weights.models import ensure_embedded_model

    tokenizer = transformers.AutoTokenizer.from_pretrained(ensure_embedded_model().path)

    def count(messages: list[dict[str, str]]) -> int:
        out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return len(out["input_ids"] if hasattr(out, "keys") else out)

    return count


def written_turn(chapters: tuple[int, ...]) -> Any:
    """The union a chapter turn offers once the chapter is written (read, search, correct,
    update, finish), narrowed to ``chapters`` as the chapter loop narrows it."""
    from agent.nst.chapter.tools import _union, _with_chapters, update_grammar
    from grammars.nst import CorrectCall, FinishCall, ReadCall, SearchCall

    return _union(
        (
            _with_chapters(ReadCall, chapters),
            SearchCall,
            _with_chapters(CorrectCall, chapters),
            update_grammar(("the_bell_rings",)),
            FinishCall,
        )
    )


def _decode_rate(engine: Any, took: float) -> float | None:
    """Tokens/s of the last call's decoding: its own decode time where the engine splits its time,
    else the whole call (a cached prompt: prefill is a small part of it)."""
    record = engine.last
    if record is None or record.completion_tokens < 2:
        return None
    seconds = record.timing.decode if record.timing is not None and record.timing.decode > 0 else took
    return record.completion_tokens / seconds


def real_run_round(engine: Any, messages: list[dict[str, str]], schema: Any, number: int) -> dict[str, float | None]:
    """One round of the real-run cases for one engine behind fabula's LLM layer."""
    out: dict[str, float | None] = {}
    turn = written_turn((1, 2))
    for key, output_type in (("ctx_json_tps", schema), ("ctx_union_tps", turn)):
        try:
            engine.call(messages, 2, output_type)  # the prompt into the cache, the constraint compiled
            took, _, _, _ = engine.call(messages, DECODE_TOKENS, output_type, temperature=0.7)
            out[key] = _decode_rate(engine, took)
        except Exception as exc:  # a server whose context is shorter than the case
            print(f"  {engine.name}: no {key} ({type(exc).__name__}: {str(exc)[:80]})", file=sys.stderr)
            out[key] = None
    new = written_turn(tuple(range(1, 4 + number)))  # a schema no earlier call used
    out["new_schema_first_s"], _, _, _ = engine.call(fresh(ASK_STATE), 8, new)
    timing = engine.last.timing
    out["new_schema_compile_s"] = timing.compile if timing is not None else None
    out["new_schema_again_s"], _, _, _ = engine.call(fresh(ASK_STATE), 8, new)
    return out


def recomputed_share(engine: Any, prompts: list[list[dict[str, str]]]) -> float | None:
    """Share of the sequence's prompt tokens the engine computed again (1 - cached / prompt)."""
    total = cached = 0
    for messages in prompts:
        _, prompt, hit, _ = engine.call(messages, 1)
        total, cached = total + prompt, cached + hit
    if engine.name == "llamacpp":
        return None  # its API does not report reused tokens
    return 1 - cached / total if total else None


def ideal_share(prompts: list[list[dict[str, str]]]) -> float:
    """The least any prefix cache could recompute on the replay: each prompt against the longest
    prefix it shares with any earlier one (the model's own tokenizer and template). What is left
    is the scripted replies and tool results, which an engine that wrote them has in its cache."""
    import transformers

    from agent.weights.models import ensure_embedded_model

    tokenizer = transformers.AutoTokenizer.from_pretrained(ensure_embedded_model().path)
    ids = []
    for messages in prompts:
        out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids.append(list(out["input_ids"] if hasattr(out, "keys") else out))
    reused = 0
    for k, current in enumerate(ids):
        best = 0
        for earlier in ids[:k]:
            n = 0
            for a, b in zip(earlier, current, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        reused += best
    return 1 - reused / sum(len(i) for i in ids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip", action="append", default=[], choices=ENGINES)
    parser.add_argument(
        "--context",
        type=int,
        default=CONTEXT,
        help=f"tokens of cached prompt in the real-run cases (default {CONTEXT})",
    )
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    from agent.llm import Regex
    from agent.weights.models import ensure_gguf
    from grammars import get_grammar

    gguf = ensure_gguf()
    gbs = bandwidth_gbs()
    model_bytes = gguf.stat().st_size
    limit = gbs * 1e9 / model_bytes
    print(
        f"memory bandwidth (streaming copy): {gbs:.1f} GB/s; the model's smallest weights (the shipped Q4_1 "
        f"GGUF) {model_bytes / 2**20:.0f} MiB -> decode limit {limit:.0f} tokens/s"
    )
    prompts = chapter_prompts()
    ideal = ideal_share(prompts)
    schema = get_grammar("nst_update")
    at_context = context_messages(args.context, template_count())
    engines = open_engines(set(args.skip))
    try:
        for engine in engines:  # compile every constraint once, outside the timings
            engine.call(fresh(ASK_STATE), 8, schema)
            if engine.name != "llamacpp":
                engine.call(fresh(STORY), 8, Regex(REGEX))
        rounds: dict[str, list[dict[str, float | None]]] = {e.name: [] for e in engines}
        real: dict[str, list[dict[str, float | None]]] = {e.name: [] for e in engines if isinstance(e, FabulaEngine)}
        for number in range(args.rounds):
            for engine in engines:
                rounds[engine.name].append(measure_round(engine, schema))
                if engine.name in real:
                    real[engine.name].append(real_run_round(engine, at_context, schema, number))
            print(f"round {number + 1}/{args.rounds} done", file=sys.stderr)
        shares = {e.name: recomputed_share(e, prompts) for e in engines}
    finally:
        for engine in engines:
            engine.close()
    rows = []
    for engine in engines:
        figures = {key: _median([r[key] for r in rounds[engine.name]]) for key in rounds[engine.name][0]}
        rows.append(
            {
                "name": engine.name,
                "backend": engine.backend,
                **figures,
                "recomputed_share": shares[engine.name],
                "weights_mib": round(engine.weights / 2**20, 1) if engine.weights else None,
                "decode_over_limit": figures["decode_tps"] / limit if figures["decode_tps"] else None,
            }
        )
    _print_table(rows, limit, len(prompts))
    real_rows = [
        {"name": name, **{key: _median([r[key] for r in found]) for key in found[0]}} for name, found in real.items()
    ]
    _print_real_table(real_rows, args.context)
    print(
        f"the least any prefix cache could recompute on this replay: {ideal:.3f} (replies and tool results "
        "are new to a replay; a real run's ledger shows what an engine that wrote them reuses)"
    )
    data = {
        "bandwidth_gbs": gbs,
        "model_bytes": model_bytes,
        "bandwidth_limit_tps": limit,
        "prefix_case_calls": len(prompts),
        "prefix_case_ideal_share": ideal,
        "rounds": args.rounds,
        "engines": rows,
        "real_run_context": args.context,
        "real_run_cases": real_rows,
    }
    write_results("bench_engines", data, args.json)
    return 0


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _print_table(rows: list[dict[str, Any]], limit: float, calls: int) -> None:
    def fmt(value: float | None, digits: int = 0) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    print(
        f"\n{'engine':18} {'prefill t/s':>11} {'decode t/s':>10} {'json t/s':>9} {'regex t/s':>9} "
        f"{'ttft s':>7} {'recomputed':>10} {'of limit':>8} {'weights MiB':>11}"
    )
    for r in rows:
        print(
            f"{r['name']:18} {fmt(r['prefill_tps']):>11} {fmt(r['decode_tps']):>10} {fmt(r['decode_json_tps']):>9} "
            f"{fmt(r['decode_regex_tps']):>9} {fmt(r['ttft_s'], 3):>7} {fmt(r['recomputed_share'], 3):>10} "
            f"{fmt(r['decode_over_limit'], 2):>8} {fmt(r['weights_mib']):>11}"
        )
    by = {r["name"]: r for r in rows}
    if "embedded" in by and "embedded-previous" in by:
        new, old = by["embedded"], by["embedded-previous"]
        print(
            f"\nembedded over embedded-previous: decode {new['decode_tps'] / old['decode_tps']:.1f}x, "
            f"json {new['decode_json_tps'] / old['decode_json_tps']:.1f}x, "
            f"prefill {new['prefill_tps'] / old['prefill_tps']:.1f}x"
        )
    if "embedded" in by and "llamacpp" in by:
        print(
            f"llamacpp over embedded: decode {by['llamacpp']['decode_tps'] / by['embedded']['decode_tps']:.2f}x, "
            f"json {by['llamacpp']['decode_json_tps'] / by['embedded']['decode_json_tps']:.2f}x"
        )
    print(f"decode limit {limit:.0f} tokens/s; repeated-prefix case: {calls} calls of a scripted NstAgent run")


def _print_real_table(rows: list[dict[str, Any]], context: int) -> None:
    def fmt(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    print(f"\nreal-run cases: decode on a cached {context}-token prompt, and a schema never seen before")
    print(f"{'engine':18} {'json t/s':>9} {'union t/s':>9} {'new schema s':>12} {'compile s':>9} {'again s':>8}")
    for r in rows:
        print(
            f"{r['name']:18} {fmt(r['ctx_json_tps']):>9} {fmt(r['ctx_union_tps']):>9} "
            f"{fmt(r['new_schema_first_s'], 2):>12} {fmt(r['new_schema_compile_s'], 2):>9} "
            f"{fmt(r['new_schema_again_s'], 2):>8}"
        )


if __name__ == "__main__":
    sys.exit(main())
