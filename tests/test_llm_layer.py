"""The shared call shape, on a scripted backend: checks that hold for every backend."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from agent.llm import (
    CallRecord,
    Choice,
    JsonSchema,
    LLMError,
    OutputValidationError,
    Regex,
    Request,
    TruncatedOutputError,
)
from agent.llm.base import split_reasoning
from agent.llm.constraints import to_constraint
from agent.testing.scripted import ScriptedLLM
from grammars.demo import CharacterSheet

USER = [{"role": "user", "content": "hi"}]
SHEET = (
    '{"name": "Ada", "temperament": "calm", "is_villain": false, "possessions": [{"item": "key", "treasured": true}]}'
)


def test_pydantic_output_is_parsed_and_validated():
    llm = ScriptedLLM([SHEET])
    completion = llm.generate(USER, CharacterSheet, temperature=0.8, max_tokens=100)
    assert isinstance(completion.parsed, CharacterSheet)
    assert completion.parsed.possessions[0].item == "key"
    assert completion.parsed.secret is None
    assert completion.usage.cached_prompt_tokens == 4


def test_truncated_structured_reply_is_an_error_never_a_partial_parse():
    llm = ScriptedLLM([('{"name": "Ada", "temper', "length")])
    with pytest.raises(TruncatedOutputError, match="max_tokens=7"):
        llm.generate(USER, CharacterSheet, temperature=0, max_tokens=7)


def test_truncated_free_text_is_returned_with_its_finish_reason():
    llm = ScriptedLLM([("Once upon a", "length")])
    completion = llm.generate(USER, temperature=0, max_tokens=3)
    assert completion.text == "Once upon a" and completion.finish_reason == "length"


def test_reply_violating_the_model_is_rejected_even_if_json():
    llm = ScriptedLLM([SHEET.replace('"calm"', '"furious"'), '{"name": "Ada", "extra": 1}'])
    with pytest.raises(OutputValidationError, match="temperament"):
        llm.generate(USER, CharacterSheet, temperature=0, max_tokens=100)
    with pytest.raises(OutputValidationError):
        llm.generate(USER, CharacterSheet, temperature=0, max_tokens=100)


def test_json_schema_regex_and_choice_outputs():
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    llm = ScriptedLLM(['{"n": 3}', '{"n": "x"}', "1984", "84", "blue", "pink"])
    assert llm.generate(USER, JsonSchema(schema, "count"), temperature=0, max_tokens=9).parsed == {"n": 3}
    with pytest.raises(OutputValidationError):
        llm.generate(USER, schema, temperature=0, max_tokens=9)
    assert llm.generate(USER, Regex(r"\d{4}"), temperature=0, max_tokens=9).parsed == "1984"
    with pytest.raises(OutputValidationError):
        llm.generate(USER, Regex(r"\d{4}"), temperature=0, max_tokens=9)
    assert llm.generate(USER, ["red", "blue"], temperature=0, max_tokens=9).parsed == "blue"
    with pytest.raises(OutputValidationError):
        llm.generate(USER, Choice(["red", "blue"]), temperature=0, max_tokens=9)


def test_reasoning_is_never_parsed_as_the_answer():
    llm = ScriptedLLM(['<think>maybe {"n": 1}?</think>\n{"n": 2}'])
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    completion = llm.generate(USER, schema, temperature=0, max_tokens=50)
    assert completion.parsed == {"n": 2}
    assert completion.reasoning == 'maybe {"n": 1}?'
    assert split_reasoning("plain", None) == ("plain", None)


def test_every_call_is_recorded_successes_and_failures():
    records: list[CallRecord] = []
    llm = ScriptedLLM([SHEET, ('{"na', "length"), "free text"])
    llm.recorders.append(records.append)
    llm.generate(USER, CharacterSheet, temperature=0.2, max_tokens=100, role="critic")
    with pytest.raises(TruncatedOutputError):
        llm.generate(USER, CharacterSheet, temperature=0.1, max_tokens=2, role="narrator")
    llm.generate(USER, temperature=0.3, max_tokens=5)
    assert [r.role for r in records] == ["critic", "narrator", None]
    assert records[0].schema_name == "CharacterSheet" and records[0].error is None
    assert records[0].backend == "scripted" and records[0].prompt_tokens == 10
    assert records[1].error and "max_tokens" in records[1].error and records[1].finish_reason == "length"
    assert records[2].schema_name is None and records[2].temperature == 0.3


def test_generate_many_keeps_order_and_reports_failures():
    llm = ScriptedLLM(["a", LLMError("boom"), "c"])
    requests = [Request(USER, max_tokens=5) for _ in range(3)]
    results = llm.generate_many(requests, return_exceptions=True)
    assert results[0].text == "a" and isinstance(results[1], LLMError) and results[2].text == "c"
    llm = ScriptedLLM(["a", LLMError("boom")])
    with pytest.raises(LLMError, match="boom"):
        llm.generate_many([Request(USER, max_tokens=5), Request(USER, max_tokens=5)])
    assert not llm.replies  # the second request still ran


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"temperature": -1, "max_tokens": 5}, "temperature"),
        ({"temperature": 0, "max_tokens": 0}, "max_tokens"),
        ({"temperature": 0, "max_tokens": 5, "min_tokens": 6}, "min_tokens"),
    ],
)
def test_bad_sampling_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ScriptedLLM(["x"]).generate(USER, **kwargs)


def test_bad_messages_and_output_types_are_refused():
    with pytest.raises(ValueError, match="empty"):
        ScriptedLLM(["x"]).generate([], temperature=0, max_tokens=5)
    with pytest.raises(ValueError, match="bad message"):
        ScriptedLLM(["x"]).generate([{"role": "robot", "content": "x"}], temperature=0, max_tokens=5)
    with pytest.raises(ValueError, match="tool_call_id"):  # a tool result names the call it answers
        ScriptedLLM(["x"]).generate([{"role": "tool", "content": "x"}], temperature=0, max_tokens=5)
    with pytest.raises(ValueError, match="must come"):  # and follows the assistant message that called it
        ScriptedLLM(["x"]).generate(
            [*USER, {"role": "tool", "content": "x", "tool_call_id": "c"}], temperature=0, max_tokens=5
        )
    with pytest.raises(ValueError, match="not both"):
        ScriptedLLM(["x"]).generate(USER, dict, temperature=0, max_tokens=5, tools=[{"type": "function"}])
    with pytest.raises(TypeError):
        to_constraint(42)  # type: ignore[arg-type]


def test_equal_schemas_share_a_cache_key():
    class A(BaseModel):
        x: int

    assert to_constraint(A).cache_key == to_constraint(A.model_json_schema()).cache_key
    assert to_constraint(Regex("a+")).cache_key != to_constraint(Regex("b+")).cache_key
