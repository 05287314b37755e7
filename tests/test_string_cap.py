"""``Sampling.max_string_chars``: a structured reply's strings are closed at a length, by the
in-process engines at decode time and by a server as each free string's ``maxLength``."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import BaseModel

from agent.llm import TruncatedOutputError
from agent.llm.endpoint import EndpointLLM
from agent.llm.sampling import Sampling
from agent.llm.string_cap import JsonStrings, StringCap, capped_schema, closing_tokens
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


def test_a_server_gets_the_cap_as_maxlength_on_free_strings_only():
    schema = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "short": {"type": "string", "maxLength": 10},
            "key": {"type": "string", "pattern": "^[a-z_]+$"},
            "tool": {"type": "string", "enum": ["read"]},
            "items": {"type": "array", "items": {"type": "string", "minLength": 1}},
        },
    }
    capped = capped_schema(schema, 40)
    props = capped["properties"]
    assert props["text"]["maxLength"] == 40 and props["short"]["maxLength"] == 10
    assert props["items"]["items"] == {"type": "string", "minLength": 1, "maxLength": 40}
    assert "maxLength" not in props["key"] and "maxLength" not in props["tool"]
    assert "maxLength" not in schema["properties"]["text"]  # the caller's schema is not changed


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


def test_the_endpoint_sends_the_cap_in_the_schema_and_not_as_a_body_field():
    def answer(call) -> Answer:
        return Answer(200, replies.chat_reply('{"title": "t", "text": "x"}', "stop", model="m", prompt=9, completion=5))

    server = FakeServer({"GET *": lambda call: Answer(200, replies.model_list({"id": "m"})), "POST *": answer})
    try:
        llm = EndpointLLM(server.root, "m")
        for cap in (25, None):
            llm.generate(LONG, Note, temperature=0, max_tokens=50, sampling=Sampling(max_string_chars=cap))
    finally:
        server.close()
    capped, plain = (body["response_format"]["json_schema"]["schema"]["properties"] for body in server.bodies)
    assert capped["text"]["maxLength"] == 25 and "maxLength" not in plain["text"]
    assert all("max_string_chars" not in body for body in server.bodies)


def test_the_small_profile_of_the_chapter_methods_caps_its_structured_replies():
    from agent.nst.config import NstConfig

    config = NstConfig.parse({"prompt": "x", "words": 600, **NstConfig.profile_settings("small")})
    assert config.structured_sampling.max_string_chars == SMALL_MAX_STRING_CHARS
    assert config.prose_sampling.max_string_chars is None
    assert NstConfig.parse({"prompt": "x", "words": 600}).structured_sampling.max_string_chars is None


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
