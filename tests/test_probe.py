"""The capability probe: what a server is and enforces, found by asking, and what follows from it."""

from __future__ import annotations

import json

import pytest

from agent.llm import JsonSchema, LLMError, OutputValidationError, open_llm
from agent.llm.endpoint import EndpointLLM, UnenforcedConstraintError
from agent.testing.hostile import HostileServer
from agent.testing.replies import chat_reply

USER = [{"role": "user", "content": "hi"}]
RANGE = JsonSchema(
    {
        "type": "object",
        "properties": {"chapter": {"type": "integer", "minimum": 1}},
        "required": ["chapter"],
        "additionalProperties": False,
    },
    name="r",
)


def server_like(
    *,
    enforces: bool,
    regex: bool,
    min_tokens: bool,
    cached: bool,
    owner: str,
    answers: list[str] | None = None,
    ranges: bool = False,
) -> HostileServer:
    """A fake server that honours (or ignores) each setting the way a real one would."""
    server = HostileServer("custom")
    server.models = {"data": [{"id": "m", "owned_by": owner, "max_model_len": 4096}]}
    queue = list(answers or [])

    def answer(body: dict) -> tuple[int, dict]:
        if min_tokens and body.get("min_tokens", 0) > body["max_tokens"]:
            return 400, {"error": {"message": "min_tokens must be less than or equal to max_tokens"}}
        text = "Hello there!"
        if queue and body["messages"][0] == USER[0]:
            text = queue.pop(0)
        elif enforces and "fabula_range" in json.dumps(body):
            text = '{"n": 7000001}' if ranges else '{"n": 1}'
        elif enforces and "response_format" in body:
            text = '{"fabula_probe": "qx7"}'
        elif regex and ("structured_outputs" in body or "regex" in body):
            text = "qx74"
        out = chat_reply(text)
        if cached:
            out["usage"]["prompt_tokens_details"] = {"cached_tokens": 0}
        return 200, out

    server.custom = answer
    return server


@pytest.fixture
def servers():
    made: list[HostileServer] = []
    yield made
    for server in made:
        server.close()


def test_a_vllm_like_server_is_identified_and_found_enforcing(servers):
    servers.append(server := server_like(enforces=True, regex=True, min_tokens=True, cached=True, owner="vllm"))
    llm = open_llm("endpoint", endpoint=server.url, thinking="off")
    probe = llm.probe
    assert (probe.kind, probe.model, probe.context_length) == ("vllm", "m", 4096)
    assert probe.json_schema_enforced and probe.regex_enforced and probe.min_tokens
    assert probe.cached_tokens_reported and probe.thinking_switch and probe.degraded == []
    assert probe.ranges_enforced is False  # outlines-backed: minimum/maximum ignored
    assert "server vllm" in probe.summary() and json.dumps(probe.as_dict())
    # a range the schema path would ignore travels as a regex that bounds it
    body = llm.payload(llm._prepare(__import__("agent.llm", fromlist=["Request"]).Request(USER, RANGE)))
    assert "regex" in body["structured_outputs"] and "response_format" not in body


def test_a_server_that_enforces_ranges_gets_the_schema_itself(servers):
    from agent.llm import Request

    servers.append(
        server := server_like(enforces=True, regex=True, min_tokens=True, cached=True, owner="vllm", ranges=True)
    )  # as with vLLM's xgrammar backend
    llm = open_llm("endpoint", endpoint=server.url)
    assert llm.probe.ranges_enforced is True
    body = llm.payload(llm._prepare(Request(USER, RANGE)))
    assert body["response_format"]["json_schema"]["schema"]["properties"]["chapter"] == {
        "type": "integer",
        "minimum": 1,
    }


def test_a_server_that_ignores_everything_is_refused_unless_allowed(servers):
    servers.append(server := server_like(enforces=False, regex=False, min_tokens=False, cached=False, owner="library"))
    with pytest.raises(
        UnenforcedConstraintError,
        match=r"\(ollama\) does not enforce JSON-schema .* "
        "--allow-unconstrained",
    ):
        open_llm("endpoint", endpoint=server.url)
    llm = open_llm("endpoint", endpoint=server.url, allow_unconstrained=True)
    assert llm.probe.kind == "ollama" and llm.probe.min_tokens is False and llm.probe.context_length == 4096
    assert any("length is kept by feedback only" in d for d in llm.probe.degraded)
    assert any("cache hits are counted as 0" in d for d in llm.probe.degraded)
    body = llm.payload(llm._prepare(__import__("agent.llm", fromlist=["Request"]).Request(USER, RANGE)))
    assert "response_format" in body  # no regex to a server that ignores regexes


def test_unconstrained_replies_are_validated_and_re_asked_a_bounded_number_of_times(servers):
    servers.append(
        server := server_like(
            enforces=False,
            regex=False,
            min_tokens=False,
            cached=False,
            owner="x",
            answers=["Sure! chapter 3", '{"chapter": 0}', '{"chapter": 3}', "nope", "no", "never"],
        )
    )
    llm = open_llm("endpoint", endpoint=server.url, allow_unconstrained=True)
    assert llm.generate(USER, RANGE, temperature=0, max_tokens=20).parsed == {"chapter": 3}
    reask = [b for b in server.bodies if b["messages"][0] == USER[0]][1]["messages"]
    assert len(reask) == 2 and "Your reply was invalid" in reask[1]["content"] and '"minimum": 1' in reask[1]["content"]
    with pytest.raises(OutputValidationError):
        llm.generate(USER, RANGE, temperature=0, max_tokens=20)  # three bad answers: 1 + 2 re-asks, then stop


def test_the_light_probe_sends_no_request_that_costs_tokens(servers):
    servers.append(server := server_like(enforces=True, regex=True, min_tokens=True, cached=True, owner="vllm"))
    llm = EndpointLLM(server.url)
    assert llm.probe.kind == "vllm" and llm.probe.json_schema_enforced is None and server.bodies == []


def test_an_unserved_model_is_refused_at_open(servers):
    servers.append(server := server_like(enforces=True, regex=True, min_tokens=True, cached=True, owner="vllm"))
    with pytest.raises(LLMError, match="does not serve model 'other'; it serves: m"):
        open_llm("endpoint", endpoint=server.url, model="other")


def test_the_probe_is_recorded_in_the_run(servers, tmp_path, capsys):
    from agent import pipelines
    from agent.store import RunStore

    servers.append(server := server_like(enforces=True, regex=True, min_tokens=True, cached=False, owner="vllm"))

    def write(ctx):
        ctx.llm.generate(USER, temperature=0, max_tokens=5)
        ctx.store.set_target(0)
        ctx.store.finish()

    pipelines.register(pipelines.Pipeline("probe-test", "chapter", write))
    options = pipelines.LLMOptions(backend="endpoint", endpoint=server.url.replace("//", "//u:pa55@"))
    pipelines.start(tmp_path / "run", "probe-test", {}, options).close()
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        probe = store.plans.server_probe()
    assert probe["kind"] == "vllm" and probe["model"] == "m" and probe["context_length"] == 4096
    assert probe["json_schema_enforced"] is True and probe["cached_tokens_reported"] is False
    assert probe["endpoint"].startswith("http://***@127.0.0.1:") and "pa55" not in json.dumps(probe)
    from agent.cli import main

    assert main(["show", str(tmp_path / "run"), "-v"]) == 0  # the server's details: -v
    shown = capsys.readouterr().out
    assert "server    vllm" in shown and "json=yes" in shown and "cached=no" in shown
    assert "degraded: cached prompt tokens not reported" in shown and "pa55" not in shown


@pytest.mark.server
def test_the_probe_of_the_real_vllm_cpu_server(vllm_server):
    llm = open_llm("endpoint", endpoint=vllm_server.endpoint, thinking="off")
    probe = llm.probe
    print("\nPROBE", json.dumps(probe.as_dict()))
    assert (probe.kind, probe.model, probe.context_length) == ("vllm", vllm_server.model, 4096)
    assert probe.version and probe.version.startswith("0.32")
    assert probe.json_schema_enforced and probe.regex_enforced and probe.min_tokens
    assert probe.cached_tokens_reported and probe.degraded == []
    assert probe.ranges_enforced is False  # tiny-cpu serves with the outlines backend
    llm.close()


@pytest.mark.parametrize(
    "owner, kind, regex_body, choice_body",
    [
        ("vllm", "vllm", {"structured_outputs": {"regex": "a+"}}, {"structured_outputs": {"choice": ["x", "y.z"]}}),
        ("sglang", "sglang", {"regex": "a+"}, {"regex": r"x|y\.z"}),
        ("llamacpp", "llama.cpp", {}, {"grammar": 'root ::= "x" | "y.z"'}),
        ("library", "ollama", {}, {}),
    ],
)
def test_each_server_kind_gets_its_own_request_shape(servers, owner, kind, regex_body, choice_body):
    from agent.llm import Choice, Regex, Request

    servers.append(server := server_like(enforces=True, regex=True, min_tokens=True, cached=True, owner=owner))
    llm = EndpointLLM(server.url)
    assert llm.probe.kind == kind

    def constraint_part(output_type) -> dict:
        body = llm.payload(llm._prepare(Request(USER, output_type)))
        return {k: v for k, v in body.items() if k in ("structured_outputs", "regex", "grammar", "response_format")}

    assert constraint_part(Regex("a+")) == regex_body
    assert constraint_part(Choice(["x", "y.z"])) == choice_body
    assert "response_format" in constraint_part(RANGE) or kind == "vllm"  # vLLM: the range goes as a regex


def test_prompt_verbose_prints_the_probe_findings(servers, tmp_path, capsys):
    from agent.cli import main

    servers.append(
        server := server_like(
            enforces=True, regex=True, min_tokens=False, cached=True, owner="vllm", answers=['{"chapter": 2}']
        )
    )
    schema = tmp_path / "r.schema.json"
    schema.write_text(json.dumps(RANGE.schema))
    assert main(["prompt", "hi", "--endpoint", server.url, "--schema", str(schema), "-v"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == {"chapter": 2}
    assert "[probe] server vllm" in out.err and "min_tokens=no" in out.err
    assert "[probe] degraded: min_tokens ignored: length is kept by feedback only" in out.err


def test_a_json_probe_reply_cut_at_its_length_is_inconclusive_not_a_refusal(servers):
    server = HostileServer("custom")
    server.custom = lambda body: (
        200,
        chat_reply(
            '{"fabula_probe":   ' if "response_format" in body else "hi",
            finish="length" if "response_format" in body else "stop",
        ),
    )
    servers.append(server)
    llm = open_llm("endpoint", endpoint=server.url)  # not refused: the server may well enforce schemas
    assert llm.probe.json_schema_enforced is None
    assert any("inconclusive" in note for note in llm.probe.degraded)


@pytest.mark.parametrize(
    "ignoring",
    [
        '{"reply": "Hello there!"}',
        '{"fabula_probe": "something else"}',
        '{"fabula_probe": "qx7", "extra": 1}',
        '["fabula_probe", "qx7"]',
    ],
)
def test_a_server_that_answers_json_but_ignores_the_schema_is_found_not_enforcing(servers, ignoring):
    """#23: no fake server answered JSON while ignoring the schema, so "any JSON counts as
    enforced" passed. JSON of another shape is not the constrained answer."""
    server = HostileServer("custom")
    server.models = {"data": [{"id": "m", "owned_by": "vllm", "max_model_len": 4096}]}
    server.custom = lambda body: (200, chat_reply(ignoring if "response_format" in body else "Hello there!"))
    servers.append(server)
    with pytest.raises(UnenforcedConstraintError):
        open_llm("endpoint", endpoint=server.url)
    llm = open_llm("endpoint", endpoint=server.url, allow_unconstrained=True)
    assert llm.probe.json_schema_enforced is False
