"""``--thinking on`` does what a user expects: ``fabula serve`` starts the preset's reasoning parser
(a name vLLM's own registry knows), every call gets a stated reasoning allowance on top of its budget,
and the reasoning is recorded in the ledger but never sent back to the model. Default: off."""

from __future__ import annotations

import importlib.util
import json
import shlex

import pytest

from agent.cli import main
from agent.llm.base import REASONING_ALLOWANCE
from agent.store import RunStore
from agent.testing.scripted import ScriptedLLM
from serve.launcher import ServeConfig, server_command
from serve.presets import PRESETS
from tests.vllm_serve_cli import parse_serve_argv

needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")


def dry_run_argv(capsys, *args: str) -> list[str]:
    assert main(["serve", *args, "--dry-run"]) == 0
    words = shlex.split(capsys.readouterr().out.strip())
    return words[next(i for i, w in enumerate(words) if "=" not in w) :]


def test_thinking_on_starts_the_presets_reasoning_parser_and_off_does_not(capsys):
    on = dry_run_argv(capsys, "--preset", "qwen3-14b-awq", "--thinking", "on")
    assert on[on.index("--reasoning-parser") + 1] == "qwen3"
    assert "--reasoning-parser" not in dry_run_argv(capsys, "--preset", "qwen3-14b-awq")  # the default is off


def test_thinking_on_for_a_model_that_does_not_think_is_one_line(capsys):
    assert main(["serve", "--preset", "gemma3-12b", "--thinking", "on", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no reasoning parser" in err[0]


@needs_vllm
@pytest.mark.parametrize("name", [n for n, p in PRESETS.items() if p.reasoning_parser or p.tool_parser])
def test_every_parser_a_preset_names_is_one_vllm_knows(name):
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    preset = PRESETS[name]
    if preset.tool_parser:
        ToolParserManager.get_tool_parser(preset.tool_parser)
    if preset.reasoning_parser:
        ReasoningParserManager.get_reasoning_parser(preset.reasoning_parser)
        config = ServeConfig.from_preset(preset, preset.model, reasoning_parser=preset.reasoning_parser)
        args = parse_serve_argv(server_command(config)[0])
        assert AsyncEngineArgs.from_cli_args(args).reasoning_parser == preset.reasoning_parser


def test_reasoning_gets_an_allowance_is_recorded_and_never_sent_back(tmp_path):
    store = RunStore.create(tmp_path / "run", pipeline="nst", config={})
    try:
        llm = ScriptedLLM(
            ["<think>The keeper lies; make him hesitate.</think>The keeper hesitated.", "He rang the bell."]
        )
        llm.thinking = "on"
        llm.recorders.append(store.ledger.recorder)
        messages = [{"role": "user", "content": "Write one line."}]
        first = llm.generate(messages, temperature=0, max_tokens=64)
        assert first.text == "The keeper hesitated." and "make him hesitate" in first.reasoning
        llm.generate(
            [*messages, {"role": "assistant", "content": first.text}, {"role": "user", "content": "Go on."}],
            temperature=0,
            max_tokens=64,
        )
        assert [r.max_tokens for r in llm.requests] == [64 + REASONING_ALLOWANCE] * 2
        assert "make him hesitate" not in json.dumps([r.messages for r in llm.requests])
        calls = store.ledger.llm_calls()
        assert calls[0].reasoning == "The keeper lies; make him hesitate." and calls[1].reasoning is None
    finally:
        store.close()


def test_thinking_off_adds_no_allowance():
    llm = ScriptedLLM(["ok"])
    llm.thinking = "off"
    llm.generate([{"role": "user", "content": "x"}], temperature=0, max_tokens=64)
    assert llm.requests[0].max_tokens == 64


@needs_vllm
def test_mtp_starts_speculative_decoding_through_the_models_own_head_and_is_off_by_default(capsys):
    from vllm.engine.arg_utils import AsyncEngineArgs

    on = dry_run_argv(capsys, "--preset", "qwen3.5-9b", "--mtp")
    spec = AsyncEngineArgs.from_cli_args(parse_serve_argv(on)).speculative_config  # vLLM's own parser
    assert spec == {"method": "mtp", "num_speculative_tokens": PRESETS["qwen3.5-9b"].mtp_tokens}
    assert "--speculative-config" not in dry_run_argv(capsys, "--preset", "qwen3.5-9b")
    assert main(["serve", "--preset", "qwen3-14b-awq", "--mtp", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no multi-token-prediction head" in err[0]


@needs_vllm
@pytest.mark.parametrize("name", [n for n, p in PRESETS.items() if p.mtp_tokens])
def test_vllm_finds_an_mtp_head_in_every_preset_that_offers_mtp(name):
    from transformers import AutoConfig
    from vllm.config.speculative import SpeculativeConfig

    from serve.sizing import model_config

    preset = PRESETS[name]
    facts = {k: v for k, v in model_config(preset.model).items() if not k.startswith("_")}
    hf_config = AutoConfig.for_model(**facts)  # the stored config.json facts as transformers reads them
    draft = SpeculativeConfig.hf_config_override(hf_config)  # what vLLM does to the target for method mtp
    assert draft.architectures[0] in ("Qwen3_5MTP", "Qwen3_5MoeMTP")
    assert draft.n_predict >= 1 and preset.mtp_tokens <= draft.n_predict
