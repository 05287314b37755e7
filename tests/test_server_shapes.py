"""Per-server request shapes: the probe tells each kind apart by its own routes, and each kind
receives exactly the request it reads (fake servers that answer only in their own shape)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from agent.llm import Choice, JsonSchema, Regex, Request, open_llm
from agent.llm.context import server_context
from agent.llm.probe import PROBE_SCHEMA
from agent.llm.sampling import Sampling
from agent.llm.server_kinds import OLLAMA_NUM_CTX_CAP, SERVER_KINDS
from agent.testing.kinds import MODEL, KindServer

USER = [{"role": "user", "content": "hi"}]
PROBE = JsonSchema(PROBE_SCHEMA, name="p")


@pytest.fixture
def serve():
    made: list[KindServer] = []

    def start(kind: str) -> KindServer:
        made.append(server := KindServer(kind))
        return server

    yield start
    for server in made:
        server.close()


@pytest.mark.parametrize(
    "kind, version, context",
    [
        ("vllm", "0.32.0", 4096),
        ("sglang", None, 8192),
        ("llama.cpp", None, 4096),  # the slot's n_ctx, not the trained 8192
        ("llama-cpp-python", None, None),  # it reports no context: budget with --set context_tokens
        ("tgi", "3.3.6", 2048),  # /info max_total_tokens
        ("ollama", "0.12.3", OLLAMA_NUM_CTX_CAP),  # the model's 131072, capped
    ],
)
def test_the_probe_tells_each_server_kind_apart_by_its_own_routes(serve, kind, version, context):
    server = serve(kind)
    llm = open_llm("endpoint", endpoint=server.root, thinking="off")
    probe = llm.probe
    assert (probe.kind, probe.version, probe.context_length, probe.model) == (kind, version, context, MODEL)
    assert probe.json_schema_enforced is True  # the probe asked in the shape this kind reads
    assert probe.regex_enforced is (kind in ("vllm", "sglang", "tgi"))
    assert llm.context_length == context and server_context(llm) == context  # what a run budgets against
    llm.close()


def _sent(server: KindServer, llm, output_type, **kwargs) -> dict:
    before = len(server.chats())
    llm.generate(USER, output_type, **{"temperature": 0, **kwargs})
    (body,) = server.chats()[before:]
    return body


def test_vllm_receives_structured_outputs_and_the_thinking_switch(serve):
    server = serve("vllm")
    llm = open_llm("endpoint", endpoint=server.root, thinking="off")
    assert _sent(server, llm, PROBE, temperature=0.5, max_tokens=40, seed=7) == {
        "model": MODEL,
        "messages": USER,
        "temperature": 0.5,
        "max_tokens": 40,
        "seed": 7,
        "chat_template_kwargs": {"enable_thinking": False},
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "p", "schema": PROBE_SCHEMA, "strict": True},
        },
        # structured replies are streamed, so one that runs away is cut (agent.llm.stream)
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    assert _sent(server, llm, Regex("qx7[0-9]"), max_tokens=5)["structured_outputs"] == {"regex": "qx7[0-9]"}


def test_sglang_receives_a_top_level_regex(serve):
    server = serve("sglang")
    llm = open_llm("endpoint", endpoint=server.root)
    body = _sent(server, llm, Choice(["qx74", "q.x"]), max_tokens=5)
    assert body["regex"] == r"qx74|q\.x" and "structured_outputs" not in body


def test_llama_cpp_python_receives_json_object_with_schema_and_a_gbnf_choice(serve):
    server = serve("llama-cpp-python")
    llm = open_llm("endpoint", endpoint=server.root, thinking="off")
    body = _sent(server, llm, PROBE, temperature=0, max_tokens=40)
    assert body == {
        "model": MODEL,
        "messages": USER,
        "temperature": 0,
        "max_tokens": 40,
        "response_format": {"type": "json_object", "schema": PROBE_SCHEMA},
    }  # no thinking switch
    payload = llm.payload(llm._prepare(Request(USER, Choice(["a", "b c"]))))
    assert payload["grammar"] == 'root ::= "a" | "b c"'
    assert not any(k in llm.payload(llm._prepare(Request(USER, Regex("x+")))) for k in ("grammar", "regex"))
    # what the probe sent in the OpenAI json_schema shape would have been refused (422)
    assert all(b.get("response_format", {}).get("type") != "json_schema" for b in server.chats())


def test_llama_server_gets_the_same_json_shape_and_its_thinking_switch(serve):
    server = serve("llama.cpp")
    llm = open_llm("endpoint", endpoint=server.root, thinking="on")
    body = _sent(server, llm, PROBE, max_tokens=40)
    assert body["response_format"] == {"type": "json_object", "schema": PROBE_SCHEMA}
    assert body["chat_template_kwargs"] == {"enable_thinking": True}


def test_tgi_receives_its_tagged_grammar_shape(serve):
    server = serve("tgi")
    llm = open_llm("endpoint", endpoint=server.root, thinking="off")
    body = _sent(server, llm, PROBE, temperature=0, max_tokens=40)
    assert body == {
        "model": MODEL,
        "messages": USER,
        "temperature": 0,
        "max_tokens": 40,
        "response_format": {"type": "json", "value": PROBE_SCHEMA},
    }
    assert _sent(server, llm, Regex("qx7[0-9]"), max_tokens=5)["response_format"] == {
        "type": "regex",
        "value": "qx7[0-9]",
    }


def test_ollama_is_driven_through_its_native_chat_with_num_ctx_format_and_think(serve):
    server = serve("ollama")
    llm = open_llm("endpoint", endpoint=server.root, thinking="off")
    before = len(server.chats())
    completion = llm.generate(
        USER, PROBE, temperature=0.2, max_tokens=40, seed=3, stop=["END"], sampling=Sampling(repetition_penalty=1.1)
    )
    (body,) = server.chats()[before:]
    assert body == {
        "model": MODEL,
        "messages": USER,
        "stream": False,
        "think": False,
        "format": PROBE_SCHEMA,
        "options": {
            "temperature": 0.2,
            "num_predict": 40,
            "seed": 3,
            "stop": ["END"],
            "repeat_penalty": 1.1,
            "num_ctx": OLLAMA_NUM_CTX_CAP,
        },
    }
    assert completion.parsed == {"fabula_probe": "qx7"} and completion.reasoning == "hmm"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (11, 3)
    assert completion.finish_reason == "stop"
    paths = [c.path for c in server.posted()]
    assert "/v1/chat/completions" not in paths and "/api/show" in paths


def test_an_ollama_reply_cut_at_num_predict_reads_as_length():
    reply = SERVER_KINDS["ollama"].from_wire(
        {
            "model": "m",
            "message": {"content": '{"a": '},
            "done_reason": "length",
            "prompt_eval_count": 5,
            "eval_count": 9,
        }
    )
    assert reply["choices"][0]["finish_reason"] == "length" and reply["usage"]["completion_tokens"] == 9
    assert SERVER_KINDS["vllm"].from_wire({"x": 1}) == {"x": 1}


@pytest.mark.skipif(importlib.util.find_spec("outlines") is None, reason="Outlines not installed")
def test_the_shapes_agree_with_outlines_own_server_adapters():
    """Outlines' adapters (its vLLM, SGLang, TGI and Ollama integrations) are the reference."""
    from outlines.models.ollama import OllamaTypeAdapter
    from outlines.models.sglang import SGLangTypeAdapter
    from outlines.models.tgi import TGITypeAdapter
    from outlines.models.vllm import VLLMTypeAdapter
    from outlines.types import JsonSchema as OutlinesJson
    from outlines.types import Regex as OutlinesRegex
    from outlines.types.dsl import to_regex

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    regex = OutlinesRegex("a+")
    pattern = to_regex(regex)  # Outlines wraps a pattern in a group; compare like with like
    tgi = TGITypeAdapter().format_output_type(OutlinesJson(json.dumps(schema)))["grammar"]
    tgi_kind, ollama_kind = SERVER_KINDS["tgi"], SERVER_KINDS["ollama"]
    assert tgi_kind.json_field("x", schema)["response_format"] == tgi
    assert tgi_kind.regex_field(pattern)["response_format"] == TGITypeAdapter().format_output_type(regex)["grammar"]
    assert SERVER_KINDS["sglang"].regex_field(pattern) == SGLangTypeAdapter().format_output_type(regex)["extra_body"]
    assert SERVER_KINDS["vllm"].regex_field(pattern) == VLLMTypeAdapter().format_output_type(regex)
    ollama = OllamaTypeAdapter().format_output_type(OutlinesJson(json.dumps(schema)))
    wire = ollama_kind.to_wire({"model": "m", "messages": USER, **ollama_kind.json_field("x", schema)})
    assert wire["format"] == ollama
