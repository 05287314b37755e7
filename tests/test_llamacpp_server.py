"""The endpoint backend against a second real server: llama-cpp-python's, on the same SmolLM2 GGUF.

It differs from vLLM where the README's server table says it does: JSON schemas go as
``json_object`` + ``schema`` (compiled to a GBNF grammar), a choice as a GBNF ``grammar``,
no regex field, no ``min_tokens``, no cached-token report, no context in ``/v1/models``.
"""

from __future__ import annotations

import json

import pytest

from agent.llm import Choice, Request, TruncatedOutputError, open_llm
from grammars.demo import CharacterSheet
from tests.test_embedded_backend import ASK

pytestmark = pytest.mark.server


def test_the_probe_of_llama_cpp_python_server(llamacpp_server):
    llm = open_llm("endpoint", endpoint=llamacpp_server.endpoint, thinking="off")
    probe = llm.probe
    print("\nPROBE", json.dumps(probe.as_dict()))
    assert (probe.kind, probe.model) == ("llama-cpp-python", llamacpp_server.model)
    assert probe.json_schema_enforced is True  # in its own json_object + schema shape
    assert probe.regex_enforced is False and probe.min_tokens is False and probe.cached_tokens_reported is False
    assert probe.context_length is None  # not reported: runs budget with --set context_tokens
    assert any("min_tokens ignored" in d for d in probe.degraded)
    llm.close()


def test_nested_schema_is_valid_on_every_sample(llamacpp_llm):
    requests = [Request(ASK, CharacterSheet, temperature=0.8, max_tokens=200, seed=s) for s in range(3)]
    for completion in llamacpp_llm.generate_many(requests):
        assert completion.finish_reason == "stop"
        assert CharacterSheet.model_validate_json(completion.text) == completion.parsed


def test_choice_travels_as_a_grammar_and_a_cut_structured_reply_raises(llamacpp_llm):
    colour = llamacpp_llm.generate(
        [{"role": "user", "content": "What colour is the sky?"}],
        Choice(["red", "blue", "green"]),
        temperature=0.9,
        max_tokens=4,
    )
    assert colour.parsed in {"red", "blue", "green"}
    with pytest.raises(TruncatedOutputError, match="max_tokens=5"):
        llamacpp_llm.generate(ASK, CharacterSheet, temperature=0.8, max_tokens=5)
    story = [{"role": "user", "content": "Tell me a long story about a fox."}]
    a = llamacpp_llm.generate(story, temperature=0.9, max_tokens=12, seed=11)
    b = llamacpp_llm.generate(story, temperature=0.9, max_tokens=12, seed=11)
    assert a.text == b.text and a.finish_reason == "length"
