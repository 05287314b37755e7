"""#33: the native tool protocol on the embedded engines, as text in the Hermes convention
(agent.llm.tool_text): a conversation with tools, calls and results renders into plain alternating chat
messages every template accepts, a reply's ``<tool_call>`` blocks read back as calls, the in-process
counters count what is sent, the scripted models take tool requests, and the real tiny model answers
a request with tools on the llama.cpp engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.llm.context import TemplateCounter
from agent.llm.roles import role_order_error
from agent.llm.tool_text import chat_messages, read_tool_reply
from agent.llm.types import CallRecord, ToolCall
from agent.testing.scripted import ScriptedLLM

TEMPLATES = Path(__file__).parent / "fixtures" / "chat_templates"

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_chapter",
            "description": "Read a chapter of the manuscript.",
            "parameters": {"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_note",
            "description": "Keep a note for later chapters.",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        },
    },
]

CALLS = [
    ToolCall("call_0", "read_chapter", '{"number": 2}').wire(),
    ToolCall("call_1", "write_note", '{"text": "the bell rang twice — “sunk”"}').wire(),
]

CONVERSATION = [
    {"role": "system", "content": "You write a novel."},
    {"role": "user", "content": "Write chapter 3."},
    {"role": "assistant", "content": "First I look back.", "tool_calls": CALLS},
    {"role": "tool", "tool_call_id": "call_0", "content": "Chapter 2: the harbour at night."},
    {"role": "tool", "tool_call_id": "call_1", "content": "noted"},
    {"role": "user", "content": "Go on."},
]


def render(template: str, messages) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        [list(messages)], chat_template=template, add_generation_prompt=True, bos_token="<bos>", eos_token="<eos>"
    )
    return rendered[0]


def test_a_tool_conversation_renders_as_plain_alternating_messages():
    rendered = chat_messages(CONVERSATION, TOOLS)
    assert role_order_error(rendered) is None
    assert [m["role"] for m in rendered] == ["system", "user", "assistant", "user"]
    assert all(set(m) == {"role", "content"} and isinstance(m["content"], str) for m in rendered)
    system = rendered[0]["content"]
    assert system.startswith("You write a novel.\n\n")
    specs = system.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
    assert [json.loads(line) for line in specs] == TOOLS
    assert "<tool_call>" in system  # how to call is said
    # the results of one turn and the user's next words: one user message, each result in its block
    results = rendered[3]["content"]
    assert results == (
        "<tool_response>\nChapter 2: the harbour at night.\n</tool_response>\n\n"
        "<tool_response>\nnoted\n</tool_response>\n\nGo on."
    )
    # Gemma's template refuses anything but alternation; it takes the rendered conversation whole
    gemma = render((TEMPLATES / "gemma3.jinja").read_text(), rendered)
    assert "read_chapter" in gemma and "<tool_response>\nnoted" in gemma
    with pytest.raises(Exception, match="alternate"):
        render((TEMPLATES / "gemma3.jinja").read_text(), [{"role": "tool", "content": "x"}, *rendered[1:]])


def test_the_calls_a_conversation_holds_read_back_as_the_same_calls():
    """Render -> parse: the assistant turn as rendered is what the model would have written, and
    reading it back gives the calls it was made from (names, arguments as JSON, in order)."""
    assistant = chat_messages(CONVERSATION, TOOLS)[2]["content"]
    assert assistant.startswith("First I look back.\n<tool_call>\n")
    content, finish, calls = read_tool_reply(assistant, "stop", CONVERSATION[:2])
    assert (content, finish) == ("First I look back.", "tool_calls")
    assert [c.wire() for c in calls] == CALLS


def test_a_model_reply_becomes_calls_and_content():
    reply = (
        "I will read the chapter.\n<tool_call>\n"
        '{"name": "read_chapter", "arguments": {"number": 1}}\n</tool_call>\n'
        '<tool_call> {"name": "write_note", "arguments": "{\\"text\\": \\"x\\"}"}'  # no close tag: the end
    )
    content, finish, calls = read_tool_reply(reply, "stop", CONVERSATION)
    assert content == "I will read the chapter." and finish == "tool_calls"
    # ids continue past the conversation's calls (call_0, call_1) and never repeat one
    assert calls == (
        ToolCall("call_2", "read_chapter", '{"number": 1}'),
        ToolCall("call_3", "write_note", '{"text": "x"}'),
    )
    history = [{**CONVERSATION[2], "tool_calls": [ToolCall("call_2", "a", "{}").wire()]}]
    assert [c.id for c in read_tool_reply(reply, "stop", history)[2]] == ["call_1", "call_3"]
    # a following turn renders the new calls and reads them back again
    turn = [*CONVERSATION, {"role": "assistant", "content": content, "tool_calls": [c.wire() for c in calls]}]
    assert read_tool_reply(chat_messages(turn)[-1]["content"], "stop", [])[2] == tuple(
        ToolCall(f"call_{n}", c.name, c.arguments) for n, c in enumerate(calls)
    )


@pytest.mark.parametrize(
    "block",
    [
        '{"name": "read_chapter", "arguments": {"number": 1</tool_call>',  # cut JSON
        '["read_chapter"]</tool_call>',  # not an object
        '{"arguments": {}}</tool_call>',  # no name
        '{"name": "read_chapter", "arguments": 3}</tool_call>',  # arguments neither object nor text
    ],
)
def test_a_malformed_block_stays_text_and_is_no_call(block):
    reply = f"Thinking it over.\n<tool_call>\n{block}"
    assert read_tool_reply(reply, "stop", CONVERSATION) == (reply, "stop", ())
    good = '<tool_call>{"name": "write_note", "arguments": {}}</tool_call>'
    content, finish, calls = read_tool_reply(f"{reply}\n{good}", "length", CONVERSATION)
    assert content == reply and finish == "tool_calls"
    assert calls == (ToolCall("call_2", "write_note", "{}"),)


def test_no_tools_no_change_and_reasoning_is_not_searched():
    plain = [{"role": "user", "content": "Hello."}]
    assert chat_messages(plain) == plain and chat_messages(plain, []) == plain
    # tools alone add a system message of their own
    assert chat_messages(plain, TOOLS)[0]["role"] == "system" and chat_messages(plain, TOOLS)[1] == plain[0]
    call = '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
    text = f"<think>maybe {call}</think>\n\nNo call after all."
    assert read_tool_reply(text, "stop", []) == (text, "stop", ())
    content, _, calls = read_tool_reply(f"<think>yes</think>{call}", "stop", [])
    assert content == "<think>yes</think>" and [c.name for c in calls] == ["a"]


class CharTokenizer:
    """Counts characters of a ChatML rendering: enough to see what a counter renders."""

    def apply_chat_template(self, messages, **_):
        return list(render(CHATML, messages))


CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class FakeLlama:
    """What GGUFTemplate reads of a llama: the template in the metadata, a byte tokenizer."""

    def __init__(self):
        self.metadata = {"tokenizer.chat_template": CHATML}

    def token_bos(self):
        return -1

    def token_eos(self):
        return -1

    def tokenize(self, text, **_):
        return list(text.decode("utf-8"))


@pytest.mark.parametrize("kind", ["hf", "gguf"])
def test_the_in_process_counters_count_what_is_sent(kind):
    from agent.llm.local_prompt import GGUFTemplate, HFTemplate

    template = (
        HFTemplate(CharTokenizer(), "auto", name="t") if kind == "hf" else GGUFTemplate(FakeLlama(), "auto", name="g")
    )
    counter = TemplateCounter(CharTokenizer()) if kind == "hf" else template
    assert counter.count(CONVERSATION, TOOLS) == len(template.ids(CONVERSATION, TOOLS))
    assert counter.count(CONVERSATION) == len(render(CHATML, chat_messages(CONVERSATION)))
    assert counter.count(CONVERSATION, TOOLS) > counter.count(CONVERSATION) + 200  # the tools are counted
    # two conversations that differ only in a call's arguments (or the call a result answers) differ
    longer = [dict(m) for m in CONVERSATION]
    longer[2]["tool_calls"] = [ToolCall("call_0", "read_chapter", '{"number": 12}').wire(), CALLS[1]]
    assert counter.count(longer) == counter.count(CONVERSATION) + 1


def test_the_scripted_model_takes_tools_and_answers_with_calls():
    records: list[CallRecord] = []
    llm = ScriptedLLM([ToolCall("call_2", "read_chapter", '{"number": 1}'), "Chapter three begins."])
    llm.recorders.append(records.append)
    first = llm.generate(CONVERSATION, temperature=0, max_tokens=50, tools=TOOLS)
    assert first.tool_calls == (ToolCall("call_2", "read_chapter", '{"number": 1}'),)
    assert first.finish_reason == "tool_calls" and first.text == ""
    second = llm.generate(CONVERSATION, temperature=0, max_tokens=50, tools=TOOLS)
    assert second.text == "Chapter three begins." and second.tool_calls == ()
    assert [r.tools for r in records] == [["read_chapter", "write_note"]] * 2
    assert records[0].tool_calls == [first.tool_calls[0].wire()]


SHOWN_A_CALL = [
    {"role": "user", "content": "Read chapter 2."},
    {"role": "assistant", "content": '<tool_call>\n{"name": "read_chapter", "arguments": {"number": 2}}\n</tool_call>'},
    {"role": "user", "content": "Again, the same call."},
]
"""A history whose assistant turn shows a call block as text: greedy SmolLM2 then writes a call of its own
(with the native history of CONVERSATION it writes text), so the engine's reading is exercised too."""


@pytest.mark.embedded
def test_the_tiny_model_answers_a_request_with_tools_on_llama_cpp(embedded_llm, capsys):
    """The real SmolLM2 on the llama.cpp engine, two tools offered and a result in the history: a
    well-formed reply (calls read from its text, or plain text), the prompt counted as sent, the
    ledger told which tools were offered. What the model did is printed (it is tiny: either is fine)."""
    if embedded_llm.engine != "llama.cpp":
        pytest.skip("the default engine is transformers here (llama-cpp-python is not installed)")
    records: list[CallRecord] = []
    embedded_llm.recorders.append(records.append)
    try:
        replies = [
            embedded_llm.generate(conversation, temperature=0, max_tokens=96, tools=TOOLS)
            for conversation in (CONVERSATION, SHOWN_A_CALL)
        ]
    finally:
        embedded_llm.recorders.remove(records.append)
    for reply, conversation, record in zip(replies, (CONVERSATION, SHOWN_A_CALL), records, strict=True):
        assert reply.finish_reason in ("stop", "length", "tool_calls")
        assert (reply.finish_reason == "tool_calls") == bool(reply.tool_calls)
        for call in reply.tool_calls:
            assert call.id.startswith("call_") and call.name
            json.loads(call.arguments)  # a read call's arguments are JSON text
        if not reply.tool_calls:
            assert reply.text.strip()
        assert read_tool_reply(reply.text, "stop", [])[2] == ()  # no well-formed call was left unread
        assert reply.usage.prompt_tokens == embedded_llm.token_counter().count(conversation, TOOLS)
        assert record.tools == ["read_chapter", "write_note"]
        assert record.tool_calls == ([c.wire() for c in reply.tool_calls] or None)
        with capsys.disabled():
            print(f"\nSmolLM2 with tools: finish={reply.finish_reason} calls={reply.tool_calls} text={reply.text!r}")
