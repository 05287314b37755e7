"""Chat prompts as token ids for an in-process engine, counted the same way they are sent.

The embedded llama.cpp engine renders with the HF tokenizer's chat template when the model has
an HF folder (the embedded default: prompts identical, token for token, to the transformers
engine's) and with the GGUF's own template and tokenizer otherwise (any ``--model x.gguf``).
Either is also the run's exact token counter, so what the budget counts is what is decoded. A request
under the native tool protocol is rendered through :func:`agent.llm.tool_text.chat_messages` first, in
both the prompt and its count.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from agent.llm.context import TemplateCounter, count_key
from agent.llm.local_decoding import template_kwargs
from agent.llm.tool_text import chat_messages
from agent.llm.types import LLMError, Message, ToolSpec


class PromptTemplate(Protocol):
    """A token counter that also gives the ids it counted."""

    name: str
    exact: bool

    def count(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> int: ...

    def ids(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> list[int]: ...


class HFTemplate(TemplateCounter):
    """The model's HF tokenizer and chat template (with the thinking switch the run asked for)."""

    def __init__(self, tokenizer: Any, thinking: str, *, name: str) -> None:
        super().__init__(tokenizer, name=name)
        self._kwargs = template_kwargs(thinking)

    def ids(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            chat_messages(messages, tools), add_generation_prompt=True, tokenize=True, **self._kwargs
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)


class GGUFTemplate:
    """The chat template stored in a GGUF (``tokenizer.chat_template``), rendered as transformers
    renders templates (sandboxed Jinja, ``trim_blocks``, ``tojson``), tokenized by llama.cpp."""

    exact = True

    def __init__(self, llama: Any, thinking: str, *, name: str) -> None:
        source = (llama.metadata or {}).get("tokenizer.chat_template")
        if not source:
            raise LLMError(
                "embedded backend: this GGUF has no chat template (tokenizer.chat_template); "
                "use an instruct model's GGUF"
            )
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise LLMError(f"the model's chat template refused the conversation: {message}")

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = lambda value, indent=None, **_: json.dumps(value, ensure_ascii=False, indent=indent)
        env.globals["raise_exception"] = raise_exception
        self._template = env.from_string(source)
        self._llama = llama
        self._kwargs = template_kwargs(thinking)
        self._bos = self._piece(llama.token_bos())
        self._eos = self._piece(llama.token_eos())
        self.name = name
        self._counts: dict[tuple[Any, ...], int] = {}

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        return self._llama.detokenize([token], special=True).decode("utf-8", errors="ignore")

    def ids(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> list[int]:
        text = self._template.render(
            messages=chat_messages(messages, tools),
            add_generation_prompt=True,
            bos_token=self._bos,
            eos_token=self._eos,
            **self._kwargs,
        )
        add_bos = not (self._bos and text.startswith(self._bos))
        return list(self._llama.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True))

    def count(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> int:
        key = count_key(messages, tools)
        if key not in self._counts:
            if len(self._counts) >= 512:
                self._counts.pop(next(iter(self._counts)))
            self._counts[key] = len(self.ids(messages, tools))
        return self._counts[key]
