"""The llama.cpp engine's decoding loop: independent requests decoded together, one forward pass a
step for all of them (``LLM.generate_many``: a Magnet step's characters, then its critic reviews),
and a call alone as a group of one; a structured reply's drafts ride in its pass.

Why: on a CPU a small model's decode step is bound by reading its weights and KV cache; a step for
three sequences reads the weights once. SmolLM2-135M at a 1,000-token context on 2 cores decodes
60 tokens/s alone and 100 tokens/s over three sequences (docs/design/embedded-speed.md).

Each request keeps its own KV sequence, sampler chain (its seed, its penalties, its grammar) and
stops; the prompt prefix the requests share is computed once and copied between sequences (a
unified KV cache holds a shared cell once). Afterwards the first request's sequence is left as the
live cache and the others are dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agent.llm.call_clock import CallClock
from agent.llm.local_decoding import RunawayCheck, SentenceClose
from agent.llm.prefix_slots import common_prefix
from agent.llm.prompt_lookup import PromptLookup

BATCH_SEQUENCES = 4
"""Sequences the llama.cpp context holds at once (``n_seq_max``); larger lists go in groups."""
THREAD_CHECK_EVERY = 32
"""Generated tokens between two looks at the cores (the engine's thread watch)."""
MIN_SHARED_SHARE = 0.5
"""Decode together only requests whose shared prompt prefix is at least this share of the longest
prompt: in a unified KV cache every token attends over every sequence's cells, so prompts that
share little prefill slower together. Measured (``scripts/bench_together.py``): a Magnet step's
critic reviews share 96 % and decode 1.19x the tokens/s together; its characters in a story's
first step share 35 % and ran at 0.92x."""


DRAFTS_JUDGED_AFTER = 4
MIN_KEPT_A_PASS = 1.0
"""A lane stops drafting once, over at least :data:`DRAFTS_JUDGED_AFTER` passes with drafts, they
kept fewer tokens a pass than this: on 2 cores a pass of one token and four drafts costs 1.85-1.92
times a pass of one token (at 5,000 and 1,100 tokens of context), so drafts pay from about one
token kept a pass. The demo's selections (names and update ids its prompt lists in another order)
gained 1.29 tokens a pass from drafts in the kept runs, its critic reviews 1.78; the selections
decoded slower with drafts (docs/design/embedded-speed.md)."""


def worth_together(prompts: Sequence[Sequence[int]]) -> bool:
    """Whether ``prompts`` share enough of a prefix to decode together (:data:`MIN_SHARED_SHARE`)."""
    if len(prompts) < 2:
        return False
    first = np.asarray(prompts[0])
    shared = min(common_prefix(first, np.asarray(p)) for p in prompts[1:])
    return shared >= MIN_SHARED_SHARE * max(len(p) for p in prompts)


class ReplyTokens:
    """A reply's tokens as they are sampled, and the rule that ends it: end of sequence,
    ``max_tokens``, a stop string, prose at its close point, or a structured reply running away. One
    rule for a call decoded alone and one decoded with others."""

    def __init__(
        self,
        *,
        max_tokens: int,
        stop: Sequence[str] | None,
        processors: Sequence[Any],
        runaway: RunawayCheck | None,
        is_eog: Callable[[int], bool],
        detokenize: Callable[[list[int]], str],
        close: SentenceClose | None = None,
    ) -> None:
        self.ids: list[int] = []
        self.max_tokens, self.stop = max_tokens, list(stop or [])
        self.processors, self.runaway, self.close = list(processors), runaway, close
        self.is_eog, self.detokenize = is_eog, detokenize

    def take(self, token: int, clock: CallClock) -> bool:
        """Add a sampled token; True when the reply ends with it (it is then not evaluated)."""
        self.ids.append(token)
        if self.is_eog(token) or len(self.ids) >= self.max_tokens:
            return True
        with clock.part("mask"):
            for processor in self.processors:
                processor.accept(token)
        if self.stop and self._hit_stop():
            return True
        if self.close is not None and self.close(self.ids):
            return True
        return self.runaway is not None and self.runaway(self.ids)

    def _hit_stop(self) -> bool:
        longest = max(len(s) for s in self.stop)
        tail = self.detokenize(self.ids[-(longest + 8) :])
        return any(s in tail for s in self.stop)


@dataclass(eq=False)
class Lane:
    """One request of a batch: its prompt, its KV sequence, its sampler chain, its reply so far."""

    prompt: list[int]
    reply: ReplyTokens
    sampler: Any
    """A ``llama_cpp`` sampler chain: the request's processors, nucleus settings and seeded draw."""
    clock: CallClock = field(default_factory=CallClock)
    seq: int = 0
    start: int = 0
    """Where this sequence's own prompt tokens begin (those before are in its cache)."""
    cached: int = 0
    """Prompt tokens not computed for this request: held from an earlier call, or computed once
    for the batch by the first lane (which counts them as its own)."""
    done: bool = False
    finished_at: float = 0.0
    drafts: PromptLookup | None = None
    """Where the lane's drafts come from (:mod:`agent.llm.prompt_lookup`); ``None``: no drafts."""
    drafted: int = 0
    """Passes that carried drafts of this lane, and the drafted tokens they kept."""
    kept: int = 0

    @property
    def evaluated(self) -> int:
        """Tokens this sequence holds once its last sampled token is in: all but that token."""
        return len(self.prompt) + len(self.reply.ids) - 1

    def draft(self, room: int) -> list[int]:
        """The tokens to evaluate after the last sampled one, checked as they are sampled; none once
        the lane's drafts keep under :data:`MIN_KEPT_A_PASS` tokens a pass."""
        if self.drafts is None or (self.drafted >= DRAFTS_JUDGED_AFTER and self.kept < MIN_KEPT_A_PASS * self.drafted):
            return []
        self.drafts.extend(self.reply.ids[len(self.drafts.text) - len(self.prompt) :])
        return self.drafts.draft(min(room, self.reply.max_tokens - len(self.reply.ids)))


class Batch:
    """llama.cpp's token batch, filled token by token with a position, a sequence and whether the
    token's logits are wanted."""

    def __init__(self, capacity: int) -> None:
        import llama_cpp

        self.capacity = capacity
        self.raw = llama_cpp.llama_batch_init(capacity, 0, 1)

    def clear(self) -> None:
        self.raw.n_tokens = 0

    def add(self, token: int, position: int, seq: int, logits: bool) -> int:
        """Add a token; returns its index in the batch (where its logits are read)."""
        i = self.raw.n_tokens
        self.raw.token[i], self.raw.pos[i], self.raw.n_seq_id[i] = token, position, 1
        self.raw.seq_id[i][0] = seq
        self.raw.logits[i] = logits
        self.raw.n_tokens = i + 1
        return i

    def __len__(self) -> int:
        return int(self.raw.n_tokens)

    def free(self) -> None:
        import llama_cpp

        llama_cpp.llama_batch_free(self.raw)


class DecodeTogether:
    """Decodes a group of :class:`Lane` s on one ``llama_cpp.Llama`` whose context holds
    :data:`BATCH_SEQUENCES` sequences in a unified KV cache. ``live``: how many of the first
    lane's prompt tokens the live cache holds (the engine's prefix slots chose it);
    ``use_threads``: the engine's thread watch, called every :data:`THREAD_CHECK_EVERY` steps."""

    def __init__(self, llama: Any, use_threads: Callable[[], None]) -> None:
        import llama_cpp

        self.llama = llama
        self.ctx = llama._ctx
        self.memory = llama_cpp.llama_get_memory(llama._ctx.ctx)
        self.use_threads = use_threads

    def run(self, lanes: list[Lane], live: int) -> None:
        """Decode every lane to its end; ``lanes[0]`` is left as the live cache."""
        import llama_cpp

        first, others = lanes[0], lanes[1:]
        keep = min(live, len(first.prompt) - 1)  # the last prompt token is evaluated for its logits
        shared = min([common_prefix(np.asarray(first.prompt), np.asarray(o.prompt)) for o in others], default=keep)
        shared = min(shared, *(len(lane.prompt) - 1 for lane in lanes))
        llama_cpp.llama_memory_seq_rm(self.memory, -1, keep, -1)
        batch = Batch(self.llama.n_batch)
        try:
            first.cached = keep
            if shared > keep:  # the prefix they share, computed once in the first sequence
                self._prefill(batch, [(first, position) for position in range(keep, shared)], lanes, shared=True)
                keep = shared
            first.seq, first.start = 0, keep
            for number, lane in enumerate(others, start=1):
                lane.seq, lane.start, lane.cached = number, shared, shared
                llama_cpp.llama_memory_seq_rm(self.memory, number, -1, -1)
                llama_cpp.llama_memory_seq_cp(self.memory, 0, number, 0, shared)
            self._prefill(batch, [(lane, p) for lane in lanes for p in range(lane.start, len(lane.prompt))], lanes)
            self._decode(batch, lanes)
        except BaseException:  # an interrupted batch leaves no half-written sequence behind
            llama_cpp.llama_memory_clear(self.memory, True)
            self.llama.reset()
            raise
        finally:
            batch.free()
        for lane in others:
            llama_cpp.llama_memory_seq_rm(self.memory, lane.seq, -1, -1)
        held = first.prompt + first.reply.ids[:-1]
        self.llama.input_ids[: len(held)] = held
        self.llama.n_tokens = len(held)
        self.llama._requires_eval = True  # the logits left are another sequence's

    def _prefill(
        self, batch: Batch, tokens: list[tuple[Lane, int]], lanes: list[Lane], *, shared: bool = False
    ) -> None:
        """Evaluate ``(lane, position)`` prompt tokens in chunks of the context's batch size; a
        lane's first token is sampled once its last prompt token is in. Each chunk's time goes to
        the lanes by their share of its tokens (a shared prefix: to every lane alike)."""
        for begin in range(0, len(tokens), batch.capacity):
            chunk = tokens[begin : begin + batch.capacity]
            batch.clear()
            last: list[tuple[Lane, int]] = []
            for lane, position in chunk:
                is_last = position == len(lane.prompt) - 1
                index = batch.add(lane.prompt[position], position, lane.seq, is_last)
                if is_last:
                    last.append((lane, index))
            took = self._forward(batch)
            shares = {id(lane): 0 for lane in lanes}
            for lane, _ in chunk:
                shares[id(lane)] += 1
            for lane in lanes:
                share = 1 / len(lanes) if shared else shares[id(lane)] / len(chunk)
                lane.clock.add("prefill", took * share)
            for lane, index in last:
                self._sample(lane, index)

    def _decode(self, batch: Batch, lanes: list[Lane]) -> None:
        """One forward pass a step for every lane still writing, until none is: each lane's last
        sampled token and its drafts, sampled position by position while the sampled token is the
        draft (the cells of the drafts not kept are dropped); each lane's share of a pass is its
        share of the tokens."""
        import llama_cpp

        steps = 0
        room = self.llama.n_ctx() - 1
        while True:
            active = [lane for lane in lanes if not lane.done]
            if not active:
                return
            batch.clear()
            planned: list[tuple[Lane, list[int], list[int]]] = []
            for lane in active:
                guess = lane.draft(room - lane.evaluated - 1)
                at = lane.evaluated
                tokens = [lane.reply.ids[-1], *guess]
                planned.append((lane, guess, [batch.add(t, at + i, lane.seq, True) for i, t in enumerate(tokens)]))
            took = self._forward(batch)
            for lane, guess, indexes in planned:
                lane.clock.add("decode", took * len(indexes) / len(batch))
                for position, index in enumerate(indexes):
                    self._sample(lane, index)
                    if lane.done or position == len(guess) or lane.reply.ids[-1] != guess[position]:
                        break
                    lane.kept += 1
                if guess:
                    lane.drafted += 1
                    llama_cpp.llama_memory_seq_rm(self.memory, lane.seq, lane.evaluated, -1)
            steps += 1
            if steps % THREAD_CHECK_EVERY == 0:
                self.use_threads()

    def _forward(self, batch: Batch) -> float:
        import llama_cpp

        started = time.perf_counter()
        status = int(llama_cpp.llama_decode(self.ctx.ctx, batch.raw))
        if status != 0:
            raise RuntimeError(f"llama_decode returned {status} for a batch of {len(batch)} tokens")
        return time.perf_counter() - started

    def _sample(self, lane: Lane, index: int) -> None:
        """Sample the lane's next token from the logits at ``index`` of the last batch (its sampler
        chain runs its processors, timed as its mask); a token that ends the reply ends the lane."""
        clock = lane.clock
        started, before = time.perf_counter(), clock.timing().total
        token = int(lane.sampler.sample(self.ctx, index))
        clock.add("sample", max(0.0, time.perf_counter() - started - (clock.timing().total - before)))
        if lane.reply.take(token, clock):
            lane.done, lane.finished_at = True, time.perf_counter()


def hold_sequences(llama: Any, count: int) -> None:
    """Reopen ``llama``'s context to hold ``count`` sequences in one unified KV cache (llama-cpp-python
    opens one sequence and has no argument for more). Unified: every sequence may use the whole
    context, so a call alone still has all of it; one sequence decodes as fast as before."""
    import contextlib

    from llama_cpp import _internals

    params = llama.context_params
    params.n_seq_max, params.kv_unified = count, True
    llama._ctx.close()
    llama._ctx = llama._stack.enter_context(
        contextlib.closing(_internals.LlamaContext(model=llama._model, params=params, verbose=llama.verbose))
    )
