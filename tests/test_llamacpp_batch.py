"""#35: the llama.cpp engine decodes a ``generate_many`` list together (one forward pass a step for
all of them) when they share most of their prompts, each request with its own sequence, sampler
and stops; the prefix they share is computed once; the engine is left as a call alone would leave
it, even after Ctrl-C."""

from __future__ import annotations

import time

import pytest
from pydantic import BaseModel, Field

from agent.llm import LLMError
from agent.llm.base import LLM, Request
from agent.llm.embedded_llamacpp import PREFILL_BATCH, PREFILL_UBATCH, llamacpp_available
from agent.llm.llamacpp_batch import BATCH_SEQUENCES, worth_together
from agent.llm.types import RawReply, Usage
from tests.interrupts import FIRM, FOX, ctrl_c_at_token

needs_llamacpp = pytest.mark.skipif(
    not llamacpp_available(), reason="llama-cpp-python is not installed (scripts/setup builds it)"
)

STORY = "The harbour wall is old and the keeper climbs it every night to light the lamp. " * 14


class Move(BaseModel):
    action: str = Field(max_length=80)


def _asks(names: list[str], *, max_tokens: int = 80) -> list[Request]:
    return [
        Request(
            [{"role": "system", "content": STORY}, {"role": "user", "content": f"What does {name} do next?"}],
            Move,
            0.8,
            max_tokens,
            None,
            None,
            11 + number,
            "character",
        )
        for number, name in enumerate(names)
    ]


def _other_sequences_hold_nothing(llm) -> bool:
    import llama_cpp

    memory = llama_cpp.llama_get_memory(llm._llama._ctx.ctx)
    return all(llama_cpp.llama_memory_seq_pos_max(memory, s) == -1 for s in range(1, BATCH_SEQUENCES))


@needs_llamacpp
@pytest.mark.embedded
def test_requests_are_decoded_together_sharing_their_prefix(llamacpp):
    """Three structured requests: valid replies whose latencies overlap (decoded one after another
    they could not), each with the batch's time on the others as ``alongside``; the two later
    ones find the shared system prompt computed; afterwards only the first one's sequence is held,
    and a call alone answers as it did before the batch."""
    hello = [{"role": "user", "content": "Say hello to the keeper."}]
    before = llamacpp.generate(hello, temperature=0, max_tokens=12).text
    seen = []
    llamacpp.recorders.append(seen.append)
    try:
        started = time.perf_counter()
        replies = llamacpp.generate_many(_asks(["Ada", "Bram", "Cleo"]))
        wall = time.perf_counter() - started
    finally:
        llamacpp.recorders.remove(seen.append)
    assert all(isinstance(r.parsed, Move) for r in replies)
    assert sum(r.latency_s for r in replies) > 1.5 * wall
    assert all(record.timing is not None and record.timing.alongside > 0 for record in seen)
    shared = len(llamacpp.template.ids([{"role": "system", "content": STORY}], None)) - 10
    assert all(r.usage.cached_prompt_tokens >= shared for r in replies[1:])
    assert all(record.timing.total <= record.latency_s + 1e-6 for record in seen)
    assert _other_sequences_hold_nothing(llamacpp)
    assert llamacpp.generate(hello, temperature=0, max_tokens=12).text == before


@needs_llamacpp
@pytest.mark.embedded
def test_the_context_reopened_for_several_sequences_prefills_in_short_passes(llamacpp):
    """The context ``hold_sequences`` reopens keeps the engine's prefill sizes: prompts handed over
    :data:`PREFILL_BATCH` tokens at a time, computed :data:`PREFILL_UBATCH` at a time (faster on a
    CPU than llama.cpp's default of the whole batch); a prompt longer than both is answered, and
    held for the next call."""
    import llama_cpp

    context = llamacpp._llama._ctx.ctx
    assert llama_cpp.llama_n_seq_max(context) == BATCH_SEQUENCES
    assert (llama_cpp.llama_n_batch(context), llama_cpp.llama_n_ubatch(context)) == (PREFILL_BATCH, PREFILL_UBATCH)
    long = [{"role": "system", "content": "Night watch. " + STORY * 3}, {"role": "user", "content": "Who climbs?"}]
    fresh = llamacpp.generate(long, temperature=0, max_tokens=8)
    again = llamacpp.generate(long, temperature=0, max_tokens=8)
    computed = fresh.usage.prompt_tokens - fresh.usage.cached_prompt_tokens
    assert computed > PREFILL_BATCH + PREFILL_UBATCH and again.usage.cached_prompt_tokens > computed
    assert fresh.text.strip() and again.text.strip()


@needs_llamacpp
@pytest.mark.embedded
def test_more_requests_than_sequences_go_in_groups_and_a_bad_one_fails_alone(llamacpp):
    asks = _asks(["Ada", "Bram", "Cleo", "Dov", "Edda"], max_tokens=60)
    too_long = Request([{"role": "user", "content": "word " * 20000}], Move, 0.8, 60, None, None, 1, "character")
    replies = llamacpp.generate_many([*asks[:2], too_long, *asks[2:]], return_exceptions=True)
    assert isinstance(replies[2], LLMError) and "maximum context length" in str(replies[2])
    assert [isinstance(r, LLMError) for r in replies].count(True) in (1, 2)  # a 135M reply may still be cut
    assert all(isinstance(r.parsed, Move) for r in replies if not isinstance(r, LLMError))
    assert _other_sequences_hold_nothing(llamacpp)


@needs_llamacpp
@pytest.mark.embedded
def test_ctrl_c_inside_a_batch_leaves_the_engine_as_before(llamacpp, monkeypatch):
    expected = llamacpp.generate(FOX, temperature=0, max_tokens=24, sampling=FIRM).text
    asks = _asks(["Ada", "Bram", "Cleo"])
    for ask in asks:
        ask.sampling = FIRM
    with ctrl_c_at_token(monkeypatch, 7):
        llamacpp.generate_many(asks)
    assert _other_sequences_hold_nothing(llamacpp)
    assert llamacpp.generate(FOX, temperature=0, max_tokens=24, sampling=FIRM).text == expected


@needs_llamacpp
@pytest.mark.embedded
def test_requests_that_share_little_of_their_prompts_are_decoded_one_after_another(llamacpp):
    seen = []
    asks = [
        Request([{"role": "user", "content": f"{topic} " * 12 + "What next?"}], Move, 0.8, 60, None, None, 3, "x")
        for topic in ("A fox crosses the frozen river.", "The market opens at dawn.", "Rain on the lighthouse.")
    ]
    llamacpp.recorders.append(seen.append)
    try:
        started = time.perf_counter()
        replies = llamacpp.generate_many(asks, return_exceptions=True)
        wall = time.perf_counter() - started
    finally:
        llamacpp.recorders.remove(seen.append)
    assert len(replies) == 3 and all(record.timing.alongside == 0 for record in seen)
    assert sum(record.latency_s for record in seen) <= wall


def test_only_prompts_that_share_half_of_the_longest_go_together():
    story = list(range(100))
    assert worth_together([[*story, 1, 2], [*story, 3], [*story, 4, 5, 6]])
    assert not worth_together([[*story[:40], *range(500, 560)], story])
    assert not worth_together([story])


class _Batched(LLM):
    """A backend that answers a list together: every first reply a looped cut, every retry valid."""

    backend = "scripted"

    def __init__(self) -> None:
        super().__init__("scripted")
        self.alone = 0

    def _complete(self, request: Request) -> RawReply:
        self.alone += 1
        return RawReply('{"action": "waits"}', "stop", Usage(10, 0, 5), "scripted")

    def _run_many(self, requests):
        cut = RawReply('{"action": "waits waits waits', "length", Usage(10, 0, 80), "scripted", runaway=True)
        return [self._run(request, (cut, 0.5)) for request in requests]


def test_a_reply_sent_together_that_looped_is_asked_again_alone_and_both_are_recorded():
    llm = _Batched()
    seen = []
    llm.recorders.append(seen.append)
    replies = llm.generate_many(_asks(["Ada", "Bram"]))
    assert [r.parsed.action for r in replies] == ["waits", "waits"] and llm.alone == 2
    assert [(r.error is not None, r.latency_s == 0.5) for r in seen[::2]] == [(True, True), (True, True)]
    assert all(r.error is None for r in seen[1::2])
