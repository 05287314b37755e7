"""A scripted backend for unit tests of control flow: replies are queued, requests kept."""

from __future__ import annotations

from agent.llm.base import LLM, Request
from agent.llm.types import LLMError, RawReply, Usage


class ScriptedLLM(LLM):
    backend = "scripted"

    def __init__(self, replies: list[str | tuple[str, str] | LLMError]) -> None:
        super().__init__("scripted-model")
        self.replies = list(replies)
        self.requests: list[Request] = []

    def _complete(self, request: Request) -> RawReply:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, LLMError):
            raise reply
        text, finish = reply if isinstance(reply, tuple) else (reply, "stop")
        return RawReply(text=text, finish_reason=finish, usage=Usage(10, 4, len(text.split())), model=self.model)
