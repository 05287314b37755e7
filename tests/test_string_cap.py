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
from agent.settings import SMALL_MAGNET_STRING_CHARS, SMALL_MAX_STRING_CHARS, SMALL_NST_STRING_CHARS
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


def test_the_tracker_names_the_key_each_value_string_belongs_to():
    strings = JsonStrings()
    keys = []
    text = b'{"tool": "update", "people": [{"name": "A", "facts": [{"key": "k"}], "evidence": "e"}], "ids": ["r", "s"]}'
    for byte in text:
        opened = not strings.inside
        strings.feed(bytes([byte]))
        if opened and strings.inside:
            keys.append(strings.key)
    # a key string belongs to no key; a value string to its key; an array's strings to the array's key
    assert keys == [None, "tool", None, None, "name", None, None, "key", None, "evidence", None, "ids", "ids"]


def test_a_keyed_limit_closes_its_field_sooner_and_none_leaves_a_field_open():
    scores = np.zeros(len(VOCAB), dtype=np.float32)
    written = [b'{"', b"text", b'":', b' "', b"abc", b"de"]
    keyed = StringCap(300, closing_tokens(VOCAB), lambda token: VOCAB[token], {"text": 5})
    for piece in written:
        keyed.accept(VOCAB.index(piece))
    assert np.isfinite(keyed(None, scores.copy())).nonzero()[0].tolist() == [2, 7, 8, 9]  # closed at 5, not 300
    other = StringCap(5, closing_tokens(VOCAB), lambda token: VOCAB[token], {"title": 100, "text": None})
    for piece in written:
        other.accept(VOCAB.index(piece))
    assert np.isfinite(other(None, scores.copy())).all()  # "text": None, no limit, though the default is 5


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
        capped = Sampling(max_string_chars=25, max_string_chars_by_key={"title": 20}, top_p=0.9)
        llm.generate(LONG, Note, temperature=0, max_tokens=50, sampling=capped)
    finally:
        server.close()
    (body,) = server.bodies
    assert "maxLength" not in json.dumps(body) and "max_string_chars" not in json.dumps(body) and body["top_p"] == 0.9
    assert recorded[0].sampling == {"top_p": 0.9}


def test_the_small_profile_caps_structured_replies_in_both_pipelines_and_never_prose():
    from agent.magnet.settings import MagnetSettings
    from agent.nst.config import NstConfig

    config = NstConfig.parse({"prompt": "x", "words": 600, **NstConfig.profile_settings("small")})
    assert config.structured_sampling.max_string_chars == SMALL_MAX_STRING_CHARS
    assert config.prose_sampling.max_string_chars is None
    assert NstConfig.parse({"prompt": "x", "words": 600}).structured_sampling.max_string_chars is None
    assert config.structured_sampling.max_string_chars_by_key == SMALL_NST_STRING_CHARS
    magnet = MagnetSettings.profile_settings("small")
    assert magnet["structured_sampling"]["max_string_chars"] == SMALL_MAX_STRING_CHARS
    assert magnet["structured_sampling"]["max_string_chars_by_key"] == SMALL_MAGNET_STRING_CHARS
    assert "max_string_chars" not in magnet["prose_sampling"]


def property_names(schema: object) -> set[str]:
    if isinstance(schema, dict):
        found = set(schema.get("properties", {})) if isinstance(schema.get("properties"), dict) else set()
        return found.union(*(property_names(v) for v in schema.values()))
    if isinstance(schema, list):
        return set().union(*(property_names(v) for v in schema))
    return set()


def test_every_keyed_limit_names_a_field_of_its_pipelines_grammars():
    """A renamed field would silently lose its limit."""
    from grammars.registry import all_grammars, schema_of

    fields = {prefix: set() for prefix in ("nst_", "magnet_")}
    for name in all_grammars():
        for prefix in fields:
            if name.startswith(prefix):
                fields[prefix] |= property_names(schema_of(name))
    assert set(SMALL_NST_STRING_CHARS) <= fields["nst_"], set(SMALL_NST_STRING_CHARS) - fields["nst_"]
    assert set(SMALL_MAGNET_STRING_CHARS) <= fields["magnet_"], set(SMALL_MAGNET_STRING_CHARS) - fields["magnet_"]


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
def test_the_llamacpp_engine_closes_a_keyed_field_at_its_own_limit(embedded_llm):
    capped = Sampling(max_string_chars=300, max_string_chars_by_key={"text": 40})
    reply = embedded_llm.generate(LONG, Note, temperature=0, max_tokens=160, sampling=capped)
    assert 40 <= len(reply.parsed.text) <= 60


@pytest.mark.embedded
def test_the_transformers_engine_closes_a_string_that_would_run_on(transformers_llm):
    with pytest.raises(TruncatedOutputError):
        written(transformers_llm, None, 100)
    text = written(transformers_llm, 60, 100)
    assert 60 <= len(text) <= 80
