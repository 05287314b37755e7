"""Every request the scripted NST and Magnet pipelines send renders through the chat templates of
one Gemma and one Qwen family (tests/fixtures/chat_templates: the templates their servers apply), as
vLLM renders them (transformers' Jinja renderer); Gemma's raises on two user turns in a row."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.nst.config import NST_DEFAULTS
from agent.store import RunStore
from tests.nst.test_role_order import fallback_author, magnet_requests, nst_requests

TEMPLATES = Path(__file__).parent / "fixtures" / "chat_templates"


def render(template: str, messages, **kwargs) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        [list(messages)],
        chat_template=template,
        add_generation_prompt=True,
        bos_token="<bos>",
        eos_token="<eos>",
        **kwargs,
    )
    return rendered[0]


@pytest.fixture(scope="module")
def scripted_requests(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scripted")
    config = {
        **NST_DEFAULTS,
        "prompt": "A bell rings for sunk ships.",
        "prompt_id": None,
        "words": 1200,
        "plan_cache": str(tmp / "plans"),
        "llm": {"backend": "scripted", "model": "scripted-author"},
    }
    store = RunStore.create(tmp / "run", pipeline="nst", config=config)
    try:
        requests = nst_requests(store, config, fallback_author(), max_turns=6)
    finally:
        store.close()
    return requests + magnet_requests(tmp)


@pytest.mark.parametrize("family", ["gemma3", "qwen3"])
def test_every_scripted_request_renders_through_the_family_template(family, scripted_requests):
    template = (TEMPLATES / f"{family}.jinja").read_text()
    kwargs = {"enable_thinking": False} if family == "qwen3" else {}
    assert len(scripted_requests) > 20
    for request in scripted_requests:
        text = render(template, request.messages, **kwargs)
        last = request.messages[-1]["content"].strip()
        assert last[-40:] in text  # nothing of the request is lost in the rendering
        if family == "gemma3":
            assert text.endswith("<start_of_turn>model\n") and "<start_of_turn>system" not in text
        else:
            assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_gemma_refuses_two_user_turns_and_qwen_does_not():
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "user", "content": "d"},
    ]
    with pytest.raises(Exception, match="Conversation roles must alternate"):
        render((TEMPLATES / "gemma3.jinja").read_text(), messages)
    render((TEMPLATES / "qwen3.jinja").read_text(), messages)  # why only Gemma presets met the bug


def test_the_thinking_switch_changes_the_qwen_prompt_that_tokenize_must_count():
    template = (TEMPLATES / "qwen3.jinja").read_text()
    ask = [{"role": "user", "content": "Hello"}]
    off, default = render(template, ask, enable_thinking=False), render(template, ask)
    assert off == default + "<think>\n\n</think>\n\n"
