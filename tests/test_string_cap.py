"""``Sampling.max_string_chars``: a structured reply's strings are closed at a length by the
in-process engines at decode time."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import BaseModel

from agent.llm import TruncatedOutputError
from agent.llm.endpoint import EndpointLLM
from agent.llm.sampling import Sampling
from agent.llm.string_cap import JsonStrings, StringCap, closing_tokens
from agent.settings import SMALL_MAX_STRING_CHARS
from agent.testing import replies
from agent.testing.server import Answer, FakeServer

VOCAB = [b'{"', b"text", b'":', b' "', b"abc", b"de", b"\\", b'"', b'",', b'"}', b"\xc3", b"\xa9", b' x"y']
"""A toy vocabulary: token ids are positions; 2, 7, 8 and 9 begin with a quote."""


def cap_after(pieces: list[bytes], limit: int) -> StringCap:
    cap = StringCap(limit, closing_tokens(VOCAB), lambda token: VOCAB[token])
    for piece in pieces:
        cap.accept(VOCAB.index(piece))
    return cap


def test_the_tracker_counts_characters_of_the_current_string_only():
    strings = JsonStrings()
    strings.feed(b'{"text": "ab\\"c\xc3\xa9')  # an escaped quote and a two-byte character count as one each
    assert strings.inside and strings.length == 5
    strings.feed(b'", "n": 3')
    assert not strings.inside
    strings.feed(b', "k')
    assert strings.inside and strings.length == 1
    strings.feed(b"\\")
    assert not strings.full(1)  # an escape is open: the string cannot be closed here


def test_a_full_string_may_only_be_closed_among_the_tokens_the_grammar_allows():
    scores = np.zeros(len(VOCAB), dtype=np.float32)
    scores[[2, 9]] = -np.inf  # the grammar allows neither '":' nor '"}' here
    cap = cap_after([b'{"', b"text", b'":', b' "', b"abc", b"de"], limit=5)
    kept = np.isfinite(cap(None, scores.copy()))
    assert kept.nonzero()[0].tolist() == [7, 8]
    short = cap_after([b'{"', b"text", b'":', b' "', b"abc"], limit=5)
    assert np.isfinite(short(None, scores.copy())).sum() == len(VOCAB) - 2  # under the limit: untouched


def test_where_the_grammar_allows_no_closing_quote_yet_the_cap_leaves_the_scores_alone():
    scores = np.zeros(len(VOCAB), dtype=np.float32)
    scores[[2, 7, 8, 9, 12]] = -np.inf  # e.g. a string under its minLength or pattern
    cap = cap_after([b'{"', b"text", b'":', b' "', b"abc", b"de"], limit=3)
    assert np.array_equal(cap(None, scores.copy()), scores)


class Note(BaseModel):
    title: str
    text: str


LONG = [
    {
        "role": "user",
        "content": "Write a long JSON note about the history of lighthouses, with a title and a very long text "
        "of many paragraphs.",
    }
]


def test_a_server_is_sent_the_request_without_the_cap_and_the_ledger_says_so():
    """As ``maxLength`` vLLM's Outlines backend gave up compiling the small profile's turn grammar after
    30 s (the request failed), so only the in-process engines apply the cap."""
    server = FakeServer(
        {
            "GET *": lambda call: Answer(200, replies.model_list({"id": "m"})),
            "POST *": lambda call: Answer(200, replies.chat_reply('{"title": "t", "text": "x"}', model="m")),
        }
    )
    recorded = []
    try:
        llm = EndpointLLM(server.root, "m")
        llm.recorders.append(recorded.append)
        llm.generate(LONG, Note, temperature=0, max_tokens=50, sampling=Sampling(max_string_chars=25, top_p=0.9))
    finally:
        server.close()
    (body,) = server.bodies
    assert "maxLength" not in json.dumps(body) and "max_string_chars" not in body and body["top_p"] == 0.9
    assert recorded[0].sampling == {"top_p": 0.9}


def test_the_small_profile_caps_structured_replies_in_both_pipelines_and_never_prose():
    from agent.magnet.settings import MagnetSettings
    from agent.nst.config import NstConfig

    config = NstConfig.parse({"prompt": "x", "words": 600, **NstConfig.profile_settings("small")})
    assert config.structured_sampling.max_string_chars == SMALL_MAX_STRING_CHARS
    assert config.prose_sampling.max_string_chars is None
    assert NstConfig.parse({"prompt": "x", "words": 600}).structured_sampling.max_string_chars is None
    magnet = MagnetSettings.profile_settings("small")
    assert magnet["structured_sampling"]["max_string_chars"] == SMALL_MAX_STRING_CHARS
    assert "max_string_chars" not in magnet["prose_sampling"]


def written(llm, cap: int | None, max_tokens: int) -> str:
    reply = llm.generate(LONG, Note, temperature=0, max_tokens=max_tokens, sampling=Sampling(max_string_chars=cap))
    return reply.parsed.text


@pytest.mark.embedded
def test_the_llamacpp_engine_closes_a_string_that_would_run_on(embedded_llm):
    with pytest.raises(TruncatedOutputError):  # without the cap the text runs to max_tokens
        written(embedded_llm, None, 160)
    text = written(embedded_llm, 60, 160)
    assert 60 <= len(text) <= 80  # closed at the first token boundary past 60 characters


@pytest.mark.embedded
def test_the_transformers_engine_closes_a_string_that_would_run_on(transformers_llm):
    with pytest.raises(TruncatedOutputError):
        written(transformers_llm, None, 100)
    text = written(transformers_llm, 60, 100)
    assert 60 <= len(text) <= 80
