"""Every decoding schema fabula sends passes vLLM's own xgrammar gate and compiles in xgrammar with
``disable_any_whitespace`` as the GPU presets set it: the registered grammars, and every constraint the
scripted NST and Magnet pipelines produce (turn grammars with their enums included). A schema with a
feature xgrammar lacks would be a 400 on every GPU and pass the CPU tests, which run on outlines."""

from __future__ import annotations

import importlib.util
import json
import string

import pytest

from agent.llm.constraints import to_constraint
from grammars.registry import all_grammars

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("xgrammar") is None or importlib.util.find_spec("vllm") is None,
    reason="vLLM and xgrammar not installed",
)


@pytest.fixture(scope="module")
def compiler():
    """An xgrammar compiler over a small byte-level vocabulary (every printable character, and a few
    words), enough to build the token masks; the grammar itself does not depend on the vocabulary."""
    import xgrammar as xgr

    vocab = [*string.printable, '{"', '":', '",', '"}', "true", "false", "null", " the", "\\n", "<|end|>"]
    info = xgr.TokenizerInfo(vocab, stop_token_ids=[len(vocab) - 1])
    return xgr.GrammarCompiler(info, max_threads=1)


def vllm_gate(constraint) -> None:
    """vLLM's own request check for the xgrammar backend (raises on a feature xgrammar lacks)."""
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams
    from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

    if constraint.kind == "json":
        params = StructuredOutputsParams(json=constraint.decoding_schema)
    elif constraint.kind == "regex":
        params = StructuredOutputsParams(regex=constraint.pattern)
    else:
        params = StructuredOutputsParams(choice=list(constraint.options))
    validate_xgrammar_grammar(SamplingParams(structured_outputs=params))


def compile_as_on_gpu(compiler, constraint) -> None:
    """The compile vLLM's xgrammar backend runs with disable_any_whitespace (backend_xgrammar.compile_grammar)."""
    if constraint.kind == "json":
        compiler.compile_json_schema(
            json.dumps(constraint.decoding_schema), any_whitespace=False, separators=(",", ":")
        )
    elif constraint.kind == "regex":
        compiler.compile_regex(constraint.pattern)


def scripted_constraints(tmp_path) -> dict[str, object]:
    """The distinct constraints of every request the scripted pipelines send."""
    from agent.nst.config import NST_DEFAULTS
    from agent.store import RunStore
    from tests.nst.test_role_order import fallback_author, magnet_requests, nst_requests

    config = {
        **NST_DEFAULTS,
        "prompt": "A bell rings for sunk ships.",
        "prompt_id": None,
        "words": 1200,
        "plan_cache": str(tmp_path / "plans"),
        "llm": {"backend": "scripted", "model": "scripted-author"},
    }
    store = RunStore.create(tmp_path / "run", pipeline="nst", config=config)
    try:
        requests = nst_requests(store, config, fallback_author(), max_turns=6)
    finally:
        store.close()
    requests += magnet_requests(tmp_path)
    return {r.constraint.cache_key: r.constraint for r in requests if r.constraint is not None}


@pytest.mark.parametrize("name", sorted(all_grammars()))
def test_every_registered_grammar_passes_vllms_xgrammar_gate_and_compiles(name, compiler):
    constraint = to_constraint(all_grammars()[name])
    vllm_gate(constraint)
    compile_as_on_gpu(compiler, constraint)


def test_every_constraint_the_scripted_pipelines_send_passes_the_gate_and_compiles(compiler, tmp_path):
    constraints = scripted_constraints(tmp_path)
    assert len(constraints) >= 5
    for constraint in constraints.values():
        vllm_gate(constraint)
        compile_as_on_gpu(compiler, constraint)


def test_a_schema_xgrammar_refuses_is_caught_by_the_gate():
    # a string with both a pattern and length bounds: vLLM's gate says xgrammar cannot do it
    from agent.llm.constraints import Constraint

    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5}},
        "required": ["name"],
    }
    with pytest.raises(Exception, match=r"not supported by xgrammar"):
        vllm_gate(Constraint(kind="json", name="bad", json_schema=schema))
