"""Numeric ranges enforced while decoding: the regexes are exact, and every grammar's bounds
reach the decoder (as an enum on any server, as a regex in-process)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.llm.bounds import (
    decoding_regex,
    enum_bounded,
    int_range_regex,
    number_range_regex,
    unenforced_bounds,
)
from grammars import all_grammars

outlines_core = pytest.importorskip("outlines_core.json_schema")
build = outlines_core.build_regex_from_schema

bound = st.integers(-2000, 2000) | st.none()  # values stay far below the 15-digit cap


@settings(max_examples=300, deadline=None)
@given(bound, bound, st.integers(-30000, 30000))
def test_int_range_regex_matches_exactly_the_range(lo, hi, value):
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    pattern = re.compile(int_range_regex(lo, hi))
    inside = (lo is None or value >= lo) and (hi is None or value <= hi)
    assert bool(pattern.fullmatch(str(value))) == inside, (lo, hi, value)
    assert not pattern.fullmatch("0" + str(abs(value)))  # no leading zeros
    assert not pattern.fullmatch("-0")


def test_open_ranges_stop_at_fifteen_digits_so_a_sample_cannot_run_on():
    pattern = re.compile(int_range_regex(1, None))
    assert pattern.fullmatch("9" * 15) and not pattern.fullmatch("1" + "0" * 15)
    assert re.fullmatch(number_range_regex(0, None), "3." + "1" * 15)
    assert not re.fullmatch(number_range_regex(0, None), "3." + "1" * 16)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 50),
    st.integers(0, 50) | st.none(),
    st.booleans(),
    st.booleans(),
    st.decimals(0, 120, places=3, allow_nan=False),
)
def test_number_range_regex_never_admits_a_value_outside(lo, hi, lo_ex, hi_ex, value):
    if hi is not None and hi < lo:
        lo, hi = hi, lo
    pattern = number_range_regex(lo, hi, lo_ex, hi_ex)
    if pattern is None:
        return
    text = format(value, "f")
    if re.fullmatch(pattern, text):
        x = float(text)
        assert x > lo if lo_ex else x >= lo
        if hi is not None:
            assert x < hi if hi_ex else x <= hi
    if hi is not None and hi - lo >= 2:  # a roomy range keeps its inner integers
        assert re.fullmatch(pattern, str(lo + 1))


def test_small_integer_ranges_become_an_enum_that_any_server_enforces():
    schema = {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "minimum": 1, "maximum": 10, "description": "d"},
            "n": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 4},
            "chapter": {"type": "integer", "minimum": 1},
        },
    }
    out = enum_bounded(schema)["properties"]
    assert out["score"] == {"type": "integer", "enum": list(range(1, 11)), "description": "d"}
    assert out["n"]["enum"] == [1, 2, 3]
    assert out["chapter"] == schema["properties"]["chapter"]  # one-sided: left for the regex
    assert unenforced_bounds(schema) == 1
    assert "enum" not in schema["properties"]["score"]  # the original is untouched


def test_decoding_regex_refuses_out_of_range_replies():
    schema = {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "minimum": 1, "maximum": 10},
            "chapter": {"type": "integer", "minimum": 1},
            "weight": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["score", "chapter", "weight"],
        "additionalProperties": False,
    }
    regex = re.compile(decoding_regex(schema, build, "[ ]?"))

    def ok(score, chapter, weight):
        return bool(regex.fullmatch(f'{{"score":{score},"chapter":{chapter},"weight":{weight}}}'))

    assert ok(1, 1, 0) and ok(10, 12345, "0.25") and ok(7, 3, "1.0")
    assert not ok(0, 1, 0) and not ok(11, 1, 0) and not ok(4667253236, 1, 0)
    assert not ok(5, 0, 0) and not ok(5, -3, 0)
    assert not ok(5, 1, "1.5") and not ok(5, 1, -1) and not ok(5, 1, "1e3")


def test_every_bounded_grammar_reaches_the_decoder_bounded():
    """Every grammar in grammars/ with a numeric bound: no bound is left for the decoder to ignore
    in-process, and an out-of-range value is refused by the regex it compiles to."""
    bounded = 0
    for name, model in all_grammars().items():
        schema = model.model_json_schema()
        text = json.dumps(schema)
        if not any(k in text for k in ('"minimum"', '"maximum"', '"exclusiveM')):
            continue
        bounded += 1
        regex = decoding_regex(schema, build, "[ ]?")
        assert "FABULARANGE" not in regex, name
        # no integer field of this grammar is compiled to an unbounded integer any more
        assert r"(-)?(0|[1-9][0-9]*)" not in regex, name
    assert bounded >= 5  # judges (1-10, 0-100) and NST tool calls (chapter >= 1)


def test_outlines_core_itself_enforces_the_spliced_ranges():
    """The decoder's own automaton (outlines_core.Index, what the embedded backend and vLLM's
    outlines backend run), over a one-character-per-token vocabulary: no model needed."""
    import string

    from outlines_core import Index, Vocabulary

    chars = [c for c in string.printable if c not in "\x0b\x0c"]
    vocabulary = Vocabulary(len(chars), {c: [i] for i, c in enumerate(chars)})
    schema = {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "minimum": 1, "maximum": 10},
            "chapter": {"type": "integer", "minimum": 1},
        },
        "required": ["score", "chapter"],
        "additionalProperties": False,
    }
    index = Index(decoding_regex(schema, build, "[ ]?"), vocabulary)

    def accepts(text: str) -> bool:
        state = index.get_initial_state()
        for ch in text:
            state = index.get_next_state(state, chars.index(ch))
            if state is None:
                return False
        return index.is_final_state(state)

    assert accepts('{"score":10,"chapter":7}') and accepts('{"score": 1, "chapter": 123}')
    for bad in (
        '{"score":0,"chapter":7}',
        '{"score":11,"chapter":7}',
        '{"score":4667253236,"chapter":1}',
        '{"score":5,"chapter":0}',
        '{"score":5,"chapter":-2}',
    ):
        assert not accepts(bad), bad
    # and without the rewrite, the same automaton lets the out-of-range values through
    plain = Index(build(json.dumps(schema), "[ ]?"), vocabulary)
    state = plain.get_initial_state()
    for ch in '{"score":0,"chapter":0}':
        state = plain.get_next_state(state, chars.index(ch))
    assert state is not None and plain.is_final_state(state)
