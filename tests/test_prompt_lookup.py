"""#35: a structured reply's next tokens drafted from its prompt and its own text so far
(:mod:`agent.llm.prompt_lookup`), and checked by the llama.cpp engine as they are sampled."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from agent.llm.base import Request
from agent.llm.embedded_llamacpp import llamacpp_available
from agent.llm.llamacpp_batch import Lane
from agent.llm.prompt_lookup import DRAFT_TOKENS, PromptLookup

needs_llamacpp = pytest.mark.skipif(
    not llamacpp_available(), reason="llama-cpp-python is not installed (scripts/setup builds it)"
)


def test_a_draft_is_what_followed_the_latest_earlier_occurrence_of_the_longest_recurring_suffix():
    drafts = PromptLookup([1, 2, 3, 4, 5, 6, 9, 2, 3, 7, 8])
    drafts.extend([1, 2, 3])  # "2 3" recurs twice, "1 2 3" once: the longer match decides
    assert drafts.draft(10) == [4, 5, 6, 9][:DRAFT_TOKENS]
    drafts.extend([7])  # "3 7" (and "2 3 7") recur: what followed them
    assert drafts.draft(2) == [8, 1]
    assert drafts.draft(0) == []


def test_no_draft_after_a_suffix_that_only_matches_itself_or_a_single_token():
    drafts = PromptLookup([5, 6, 7])
    assert drafts.draft(4) == []  # "6 7" occurs once: the suffix itself
    drafts.extend([9, 6])  # "9 6" is new, and one token ("6") is too short a match
    assert drafts.draft(4) == []
    drafts.extend([7])  # "6 7" occurred before: its follower
    assert drafts.draft(4) == [9, 6, 7]


class Move(BaseModel):
    action: str = Field(max_length=120)


EXAMPLE = '{"action": "The keeper climbs the harbour wall and lights the lamp."}'


def _copying_request() -> Request:
    messages = [
        {"role": "system", "content": f"Answer in JSON. An example answer: {EXAMPLE}"},
        {"role": "user", "content": "What does the keeper do? Answer exactly as the example does."},
    ]
    return Request(messages, Move, 0.0, 60, None, None, 7, "character")


@needs_llamacpp
@pytest.mark.embedded
def test_a_structured_reply_that_copies_its_prompt_takes_fewer_passes_and_leaves_no_draft_behind(llamacpp, monkeypatch):
    """Drafts on: a reply copying the prompt's example takes fewer forward passes than tokens, and
    the cache holds the prompt and the reply (bar its last token), none of the drafts not kept. Drafts
    off: one pass a token, the same parsed reply shape."""
    import llama_cpp

    passes: list[int] = []
    draft = Lane.draft

    def counted(lane: Lane, room: int) -> list[int]:
        passes.append(1)
        return draft(lane, room)

    monkeypatch.setattr(Lane, "draft", counted)
    request = _copying_request()
    prompt = llamacpp.template.ids(request.messages, None)
    memory = llama_cpp.llama_get_memory(llamacpp._llama._ctx.ctx)
    sides = {}
    for drafts in (True, False):
        llamacpp.drafts = drafts
        passes.clear()
        reply = llamacpp.generate(request.messages, Move, temperature=0.0, max_tokens=60, seed=7)
        sides[drafts] = (reply, len(passes))
        assert isinstance(reply.parsed, Move)
        assert llama_cpp.llama_memory_seq_pos_max(memory, 0) == len(prompt) + reply.usage.completion_tokens - 2
    llamacpp.drafts = True
    (drafted, drafted_passes), (plain, plain_passes) = sides[True], sides[False]
    assert plain_passes == plain.usage.completion_tokens - 1  # the first token comes from the prefill
    assert drafted_passes < drafted.usage.completion_tokens - 1


def _lane(prompt: list[int], first: int) -> Lane:
    from agent.llm.llamacpp_batch import ReplyTokens

    reply = ReplyTokens(
        max_tokens=50, stop=None, processors=[], runaway=None, is_eog=lambda token: False, detokenize=str
    )
    reply.ids.append(first)  # the reply's first token, sampled after the prompt
    return Lane(prompt, reply, sampler=None, drafts=PromptLookup(prompt))


def test_a_lane_whose_drafts_keep_under_a_token_a_pass_stops_drafting():
    """Drafts pay from about one token kept a pass (a pass of one token and four drafts costs
    1.85-1.92 times a pass of one): judged after four passes with drafts."""
    from agent.llm.llamacpp_batch import DRAFTS_JUDGED_AFTER, MIN_KEPT_A_PASS

    lane = _lane([4, 5, 6, 7, 4, 5], 6)
    assert lane.draft(10) == [7, 4, 5, 6][:DRAFT_TOKENS]
    lane.drafted, lane.kept = DRAFTS_JUDGED_AFTER - 1, 0  # too few passes to judge
    assert lane.draft(10)
    lane.drafted, lane.kept = DRAFTS_JUDGED_AFTER, int(MIN_KEPT_A_PASS * DRAFTS_JUDGED_AFTER) - 1
    assert lane.draft(10) == []
    lane.kept += 1
    assert lane.draft(10)
    assert lane.draft(0) == []
