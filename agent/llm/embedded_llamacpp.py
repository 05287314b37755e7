"""The ``embedded`` backend's llama.cpp engine: a GGUF in this process through llama-cpp-python.

Why: on a CPU, llama.cpp's kernels on quantized weights decode several times faster than
transformers (design: docs/design/embedded-speed.md). It keeps a KV cache between calls, so a call
that starts with the previous call's prompt recomputes only what is new; the reused tokens are
reported as ``cached_prompt_tokens``.

Constraints are the transformers engine's (:mod:`agent.llm.local_decoding`): the same regex per
schema, bounds included, compiled into an Outlines index, applied as a token mask at every step
after the sampling penalties; the same runaway stop, the same finish reasons. Sampling settings
keep transformers' semantics (repetition penalty over the whole sequence, OpenAI's frequency and
presence penalties over the reply, ``no_repeat_ngram_size``), so a profile means the same on both.

A request that offers native ``tools`` is rendered and read back as text in the Hermes convention
(:mod:`agent.llm.tool_text`), decoded unconstrained, as a vLLM server with the hermes parser does.

``generate_many`` decodes its requests together, one forward pass a step for all of them
(:mod:`agent.llm.llamacpp_batch`), as a server batches concurrent requests; a call alone is decoded
by the same loop. A structured reply's next tokens are drafted from its prompt and checked as they
are sampled (:mod:`agent.llm.prompt_lookup`): the same sampling, in fewer passes.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from agent.llm import heartbeat
from agent.llm.base import LLM, Outcome, Request
from agent.llm.call_clock import CallClock
from agent.llm.constraints import Constraint
from agent.llm.context import TokenCounter
from agent.llm.decode_threads import DecodeThreads
from agent.llm.llamacpp_batch import (
    BATCH_SEQUENCES,
    DecodeTogether,
    Lane,
    ReplyTokens,
    hold_sequences,
    worth_together,
)
from agent.llm.local_decoding import (
    ConstraintIndexes,
    RunawayCheck,
    SentenceClose,
    hf_vocabulary,
    read_reply,
    refuse_min_tokens_with_schema,
)
from agent.llm.local_prompt import GGUFTemplate, HFTemplate, PromptTemplate
from agent.llm.local_sampling import GrammarMask, MinTokens, Penalties
from agent.llm.prefix_slots import PrefixSlots, common_prefix
from agent.llm.prompt_lookup import PromptLookup
from agent.llm.string_cap import StringCaps
from agent.llm.tool_text import read_tool_reply
from agent.llm.types import Completion, LLMError, RawReply, ThinkingMode, ToolCall, Usage

MAX_DEFAULT_CONTEXT = 32768
"""The context opened when a GGUF trains for more (a 128K context's KV cache would not fit a
workstation's memory beside the weights); ``context`` asks for another."""
PREFILL_BATCH = 512
"""Prompt tokens handed to llama.cpp in one ``eval`` (and the capacity of a batch decoded together)."""
PREFILL_UBATCH = 256
"""Tokens llama.cpp computes in one pass of a prefill (its default: the whole batch, 512): the
attention scores of a smaller pass stay in the cores' caches. SmolLM2-135M Q8_0 on 2 cores
prefilled 433 tokens/s against 405 at a 1,100-token prompt and 209 against 201 at 5,000, decoding
as fast (docs/design/embedded-speed.md, the seventh round)."""


def default_threads() -> int:
    """Threads with one core spare (what a fixed count must be: llama.cpp's threads spin at their
    barriers, so with every core taken and another process busy decoding fell from 116 to 9
    tokens/s on 2 cores). The engine itself watches the cores instead
    (:class:`~agent.llm.decode_threads.DecodeThreads`)."""
    return max(1, len(os.sched_getaffinity(0)) - 1)


def llamacpp_available() -> bool:
    """Whether llama-cpp-python is installed here (``scripts/setup`` builds it once and caches it)."""
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


class LlamaCppLLM(LLM):
    """A GGUF model in process. ``tokenizer_dir``: the HF folder of the same model (the embedded
    default has one), whose tokenizer and chat template render prompts exactly as the transformers
    engine does; without it the GGUF's own template and tokenizer are used. ``threads``: a fixed
    decode thread count (benchmarks compare with it); by default the engine watches the cores.
    ``prefill_ubatch``: the tokens of one prefill pass; ``drafts``: whether structured replies
    are drafted from their prompts (both: benchmarks compare with them)."""

    backend = "embedded"
    engine = "llama.cpp"

    def __init__(
        self,
        gguf: str | Path,
        *,
        tokenizer_dir: str | Path | None = None,
        thinking: ThinkingMode = "auto",
        context: int | None = None,
        threads: int | None = None,
        prefill_ubatch: int = PREFILL_UBATCH,
        drafts: bool = True,
    ) -> None:
        path = Path(gguf).expanduser()
        if not path.is_file():
            raise LLMError(f"embedded backend: {path} does not exist (give a .gguf file or an HF model folder)")
        from agent.weights.gguf_header import NotGGUFError, gguf_info

        try:
            info = gguf_info(path)
        except NotGGUFError as exc:
            raise LLMError(f"embedded backend: {exc}") from None
        if tokenizer_dir is None and not info.has_chat_template:
            raise LLMError(f"embedded backend: {path.name} has no chat template; use an instruct model's GGUF")
        if not llamacpp_available():
            raise LLMError(
                "embedded backend: a GGUF model needs llama-cpp-python: run scripts/setup "
                "(it builds llama.cpp once and caches it)"
            )
        import llama_cpp

        self.path = path
        name = Path(tokenizer_dir).name if tokenizer_dir else path.stem
        super().__init__(name, thinking=thinking)
        self._threads = DecodeThreads(threads)
        if context is None and info.context_length and info.context_length > MAX_DEFAULT_CONTEXT:
            context = MAX_DEFAULT_CONTEXT
        try:
            self._llama = llama_cpp.Llama(
                str(path),
                n_ctx=context or 0,
                n_threads=self._threads.threads,
                n_threads_batch=self._threads.all_cores,
                n_batch=PREFILL_BATCH,
                n_ubatch=prefill_ubatch,
                logits_all=False,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise LLMError(f"embedded backend: cannot load {path.name} as a GGUF model ({exc})") from None
        hold_sequences(self._llama, BATCH_SEQUENCES)
        self._lock = threading.Lock()
        self._slots = PrefixSlots(self._llama)
        self.drafts = drafts
        self._applied_threads = (self._threads.threads, self._threads.all_cores)
        self._caps = StringCaps(lambda: [self._piece(t) for t in range(self._llama.n_vocab())], self._piece)
        self.template: PromptTemplate
        if tokenizer_dir is not None:
            import transformers

            tokenizer = transformers.AutoTokenizer.from_pretrained(Path(tokenizer_dir))
            self.template = HFTemplate(tokenizer, thinking, name=f"{self.model} tokenizer (in process)")
            self._constraints = ConstraintIndexes(lambda: hf_vocabulary(tokenizer))
        else:
            self.template = GGUFTemplate(self._llama, thinking, name=f"{self.model} GGUF tokenizer (in process)")
            self._constraints = ConstraintIndexes(self._gguf_vocabulary)

    # -- what the model is ---------------------------------------------------------------------
    @property
    def parameter_count(self) -> int | None:
        import llama_cpp

        return int(llama_cpp.llama_model_n_params(self._llama.model))

    @property
    def model_context(self) -> int | None:
        """The context this process opened (the GGUF's trained context, at most
        :data:`MAX_DEFAULT_CONTEXT` unless asked)."""
        return int(self._llama.n_ctx())

    def token_counter(self) -> TokenCounter | None:
        return self.template

    def warm_up(self, constraint: Constraint) -> None:
        """Pay the one-time compile cost of a constraint now (benchmarks and servers)."""
        self._constraints.index(constraint)

    def close(self) -> None:
        llama = getattr(self, "_llama", None)
        if llama is not None:
            self._slots.clear()
            llama.close()
            del self._llama

    # -- generation -----------------------------------------------------------------------------
    def _complete(self, request: Request) -> RawReply:
        """One request decoded alone: the same loop as a group (:meth:`_decode_lanes`), one lane."""
        prompt = self._prompt(request)
        with self._lock:
            clock = CallClock()
            lane, runaway = self._lane(request, prompt, clock)
            self._decode_lanes([lane])
        return self._raw_reply(request, prompt, lane.reply.ids, runaway, lane.cached, clock.timing())

    def _run_many(self, requests: list[Request]) -> list[Completion | LLMError]:
        """Requests without native tools decode together (:mod:`agent.llm.llamacpp_batch`), in
        groups the context holds, where they share enough of their prompts to gain from it
        (:func:`~agent.llm.llamacpp_batch.worth_together`); a looped structured reply is asked again
        alone, as ever."""
        if len(requests) < 2 or any(r.tools for r in requests):
            return super()._run_many(requests)
        sent = self._complete_together(requests)
        results: list[Completion | LLMError] = []
        for request, outcome in zip(requests, sent, strict=True):  # None: sent alone, here
            try:
                results.append(self._run(request, outcome))
            except LLMError as exc:
                results.append(exc)
        return results

    def _complete_together(self, requests: list[Request]) -> list[Outcome | None]:
        """Each request's raw reply (or why it failed) and its latency where it was decoded in a
        group; ``None`` where it is better sent alone (a group of one, prompts that share little)."""
        outcomes: dict[int, Outcome] = {}
        ready: list[tuple[int, list[int]]] = []
        for number, request in enumerate(requests):
            try:
                ready.append((number, self._prompt(request)))
            except LLMError as exc:
                outcomes[number] = (exc, 0.0)
        for group in self._groups(requests, ready):
            if worth_together([prompt for _, prompt in group]):
                with heartbeat.watched(requests[group[0][0]].role):
                    outcomes.update(self._decode_group(requests, group, time.perf_counter()))
        return [outcomes.get(number) for number in range(len(requests))]

    def _groups(self, requests: list[Request], ready: list[tuple[int, list[int]]]) -> list[list[tuple[int, list[int]]]]:
        """``ready`` in groups of at most :data:`BATCH_SEQUENCES` whose prompts and replies fit the
        context together (counted as if they shared nothing)."""
        groups: list[list[tuple[int, list[int]]]] = []
        room = 0
        for number, prompt in ready:
            need = len(prompt) + requests[number].max_tokens
            if not groups or len(groups[-1]) >= BATCH_SEQUENCES or need > room:
                groups.append([])
                room = self._llama.n_ctx()
            groups[-1].append((number, prompt))
            room -= need
        return groups

    def _decode_group(
        self, requests: list[Request], group: list[tuple[int, list[int]]], started: float
    ) -> dict[int, Outcome]:
        """Decode a group of ``requests`` (their numbers and prompts) together; a request whose
        grammar cannot compile fails alone."""
        outcomes: dict[int, Outcome] = {}
        lanes: list[tuple[int, Request, Lane, RunawayCheck]] = []
        with self._lock:
            for number, prompt in group:
                request = requests[number]
                try:
                    lane, runaway = self._lane(request, prompt, CallClock())
                except LLMError as exc:
                    outcomes[number] = (exc, time.perf_counter() - started)
                    continue
                lanes.append((number, request, lane, runaway))
            if not lanes:
                return outcomes
            self._decode_lanes([lane for _, _, lane, _ in lanes])
        for number, request, lane, runaway in lanes:
            took = lane.finished_at - started
            lane.clock.add("alongside", max(0.0, took - lane.clock.timing().total))
            raw = self._raw_reply(request, lane.prompt, lane.reply.ids, runaway, lane.cached, lane.clock.timing())
            outcomes[number] = (raw, took)
        return outcomes

    def _lane(self, request: Request, prompt: list[int], clock: CallClock) -> tuple[Lane, RunawayCheck]:
        """What decoding ``request`` takes: its reply's rule, its sampler chain, and for a structured
        reply its drafts (:mod:`agent.llm.prompt_lookup`; prose copies too little of its prompt to
        pay for them: 1.02 tokens a pass in the demo's paragraphs)."""
        reply, runaway = self._reply_tokens(request, prompt, clock)
        drafts = PromptLookup(prompt) if self.drafts and request.constraint is not None else None
        return Lane(prompt, reply, self._sampler(request, reply, clock), clock, drafts=drafts), runaway

    def _decode_lanes(self, lanes: list[Lane]) -> None:
        """Decode ``lanes`` (under the lock) from the live cache the prefix slots choose for the
        first one, which is left as the live cache."""
        first = lanes[0]
        with first.clock.part("restore"):
            self._slots.prepare(first.prompt)
            live = common_prefix(self._llama.input_ids[: self._llama.n_tokens], np.asarray(first.prompt))
        self._use_threads()
        DecodeTogether(self._llama, self._use_threads).run(lanes, live)

    def _prompt(self, request: Request) -> list[int]:
        """The request's prompt tokens, refused when it cannot be decoded here."""
        refuse_min_tokens_with_schema(request.min_tokens, request.constraint)
        prompt = self.template.ids(request.messages, request.tools)
        if len(prompt) + 1 > self._llama.n_ctx():
            raise LLMError(
                f"embedded backend: the prompt is {len(prompt)} tokens, the model's context "
                f"{self._llama.n_ctx()} (maximum context length)"
            )
        return prompt

    def _raw_reply(
        self, request: Request, prompt: list[int], new_ids: list[int], runaway: RunawayCheck, cached: int, timing: Any
    ) -> RawReply:
        eos = self._eog_ids(new_ids)
        content = new_ids[:-1] if new_ids and new_ids[-1] in eos else new_ids
        text, finish = read_reply(
            self._detokenize(content),
            new_ids,
            eos_ids=eos,
            max_tokens=request.max_tokens,
            stop=request.stop,
            runaway_stopped=runaway.stopped,
            close_after_words=request.sampling.close_after_words,
        )
        calls: tuple[ToolCall, ...] = ()
        if request.tools:
            text, finish, calls = read_tool_reply(text, finish, request.messages)
        return RawReply(
            text=text,
            finish_reason=finish,
            model=self.model,
            runaway=runaway.stopped,
            usage=Usage(prompt_tokens=len(prompt), cached_prompt_tokens=cached, completion_tokens=len(new_ids)),
            timing=timing,
            tool_calls=calls,
        )

    def _reply_tokens(self, request: Request, prompt: list[int], clock: CallClock) -> tuple[ReplyTokens, RunawayCheck]:
        """What decoding ``request`` needs: its reply's stop rule (with the processors: penalties,
        ``min_tokens``, the grammar, so nothing after it re-allows a token it masked, and the string
        cap, which only narrows it) and its runaway check; the request's seed is set for the
        sampler chain built next."""
        import llama_cpp

        with clock.part("compile"):
            grammar = GrammarMask(self._constraints.index(request.constraint)) if request.constraint else None
        penalties = Penalties.of(request.sampling, sampled=request.temperature > 0, prompt=prompt)
        processors: list[Any] = [
            p
            for p in (
                penalties,
                MinTokens.of(request.min_tokens, self._eos_id()),
                grammar,
                self._caps.for_request(request.sampling, request.constraint),
            )
            if p is not None
        ]
        runaway = RunawayCheck(self._detokenize)
        vocab = llama_cpp.llama_model_get_vocab(self._llama.model)
        reply = ReplyTokens(
            max_tokens=request.max_tokens,
            stop=request.stop,
            processors=processors,
            runaway=runaway if grammar is not None else None,
            is_eog=lambda token: bool(llama_cpp.llama_vocab_is_eog(vocab, token)),
            detokenize=self._detokenize,
            close=SentenceClose(words, self._detokenize) if (words := request.sampling.close_after_words) else None,
        )
        self._llama.set_seed(request.seed if request.seed is not None else random.getrandbits(31))
        return reply, runaway

    def _piece(self, token: int) -> bytes:
        return bytes(self._llama.detokenize([token]))

    def _sampler(self, request: Request, reply: ReplyTokens, clock: CallClock) -> Any:
        """The request's own llama.cpp sampler chain, the one ``generate`` builds for a call alone:
        its processors (timed as its mask), nucleus settings and a draw seeded by
        :meth:`_reply_tokens`."""
        return self._llama._init_sampler(
            logits_processor=self._processor_list(reply, clock), **self._sampler_settings(request)
        )

    @staticmethod
    def _processor_list(reply: ReplyTokens, clock: CallClock) -> Any:
        import llama_cpp

        timed = [clock.timed("mask", p) for p in reply.processors]
        # llama.cpp only iterates the list: its own list type, as its signature asks
        return llama_cpp.LogitsProcessorList(timed) if timed else None

    def _use_threads(self) -> None:
        """Decode on every core while other processes leave them idle, on all but one while not
        (:class:`~agent.llm.decode_threads.DecodeThreads`); a fixed count keeps prefill on all."""
        import llama_cpp

        threads = self._threads.choose()
        batch = self._threads.all_cores if self._threads.fixed else threads
        if (threads, batch) != self._applied_threads:
            llama_cpp.llama_set_n_threads(self._llama._ctx.ctx, threads, batch)
            self._applied_threads = (threads, batch)

    @staticmethod
    def _sampler_settings(request: Request) -> dict[str, Any]:
        """llama.cpp's own sampler: temperature and nucleus settings only (transformers' defaults:
        no top-k, no nucleus cut unless asked); penalties are applied by :class:`Penalties`."""
        given = request.sampling.given() if request.temperature > 0 else {}
        return {
            "temp": float(request.temperature),
            "top_k": int(given.get("top_k", 0)),
            "top_p": float(given.get("top_p", 1.0)),
            "min_p": float(given.get("min_p", 0.0)),
            "repeat_penalty": 1.0,
            "frequency_penalty": 0.0,
            "presence_penalty": 0.0,
        }

    def _detokenize(self, ids: list[int]) -> str:
        return self._llama.detokenize(ids).decode("utf-8", errors="ignore")

    def _eos_id(self) -> int:
        return int(self._llama.token_eos())

    def _eog_ids(self, new_ids: list[int]) -> set[int]:
        import llama_cpp

        vocab = llama_cpp.llama_model_get_vocab(self._llama.model)
        return {t for t in new_ids[-1:] if llama_cpp.llama_vocab_is_eog(vocab, t)} | {self._eos_id()}

    def _gguf_vocabulary(self) -> Any:
        from outlines.backends.outlines_core import OutlinesCoreBackend
        from outlines.models.llamacpp import LlamaCppTokenizer

        tok = LlamaCppTokenizer(self._llama)
        return OutlinesCoreBackend.create_outlines_core_vocabulary(
            tok.vocabulary, tok.eos_token_id, tok.eos_token, tok.convert_token_to_string
        )
