"""The scripted author behind the fake server (:mod:`agent.testing.server`), for real ``fabula`` subprocesses.

The role of each request is inferred from what a real server sees: the response schema (an
outline or a tool call) or, for plain text, the last user message. ``vllm=True`` answers
``GET /v1/models`` (and ``/version``) as vLLM does, so the endpoint backend probes it as vLLM
(context from ``max_model_len``); it has no ``/tokenize`` (prompts are then counted with the
characters estimate, as for the author in process). For the writer's-road tests:
``stall_models`` makes ``GET /v1/models`` hang (a server that accepts and never answers);
``fail_chats`` answers every story call with HTTP 500, ``fail_after`` does once that many were
answered (a server that breaks mid-run); ``model_lists`` counts the model lists asked for (one
per client opened).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from agent.llm.base import Request
from agent.llm.constraints import JsonSchema, to_constraint
from agent.testing.author import Author
from agent.testing.replies import chat_reply, model_list, probe_reply
from agent.testing.server import NO_ROUTE, Answer, Call, FakeServer, Hang


def infer_role(body: dict[str, Any]) -> str:
    if any((tool.get("function") or {}).get("name") == "write" for tool in body.get("tools") or []):
        return "nst_turn"  # the native protocol's chapter turn: the tools tell it, not the wording
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
    if schema is not None:
        properties = schema.get("properties", {})
        if "contradictions" in properties:
            return "reconcile_judge"
        if "draft" in properties and "reason" in properties:
            return "drafts_judge"
        return "plan_outline" if "chapters" in properties else "nst_turn"
    first = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if first.startswith("Story prompt:") and '{"id": 0, "name"' in first:
        return "plan_outline"  # the reference's outline (no grammar), asked or asked again: its words tell it
    last = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    if last.rsplit("\n\n", 1)[-1].startswith("Now write the complete text of chapter"):  # alone or closing a turn
        return "nst_prose"
    if last.startswith("Rewrite this passage of a novel"):
        return "lint_fix"
    if "Rewrite the summary" in last or "the updated summary of the story so far" in last:  # fabula's; the reference's
        return "rollsum_summary"
    if "Write the complete story" in first or "Reply with the story's prose" in first:  # a retry too
        return "direct_story"
    if "# Current task" in last or last.startswith("REJECTED"):
        return "rollsum_chapter"
    return "plan_stage"


class AuthorServer(FakeServer):
    """Serves ``author`` (a default :class:`Author`) as ``model``; the knobs the module names are attributes."""

    def __init__(
        self, author: Author | None = None, delay_s: float = 0.0, *, model: str = "scripted-author", vllm: bool = False
    ) -> None:
        self.author = author or Author()
        self.delay_s = delay_s
        self.model, self.vllm = model, vllm
        self.stall_models = False
        self.fail_chats = False
        self.fail_after: int | None = None
        self.count = 0
        self.prompt_tokens: int = 100
        """What every reply reports as its prompt tokens (a hostile test sets 10**30)."""
        self.gate = threading.Event()
        """Open (set) by default; a test clears it to hold every author request at the door (the
        probe is still answered), then knows exactly where each writer is: waiting on a call."""
        self.gate.set()
        self.waiting = 0
        self._waiting_lock = threading.Lock()
        # any other POST is not fabula's chat request: a stray client of an earlier test whose server held
        # this port is answered 404 and never counted (it once made fail_after fire a call early)
        super().__init__({"GET *": self.get, "POST /v1/chat/completions": self.chat})

    @property
    def model_lists(self) -> int:
        return sum(c.method == "GET" and c.path.startswith("/v1/models") for c in self.calls)

    def get(self, call: Call) -> Answer | Hang:
        if call.path.startswith("/v1/models"):
            if self.stall_models:
                return Hang(120)  # accepts, never answers (the client's timeout ends it)
            entry = (
                {"id": self.model, "object": "model", "owned_by": "vllm", "max_model_len": 32768}
                if self.vllm
                else {"id": self.model}
            )
            return Answer(200, model_list(entry))
        if self.vllm and call.path == "/version":
            return Answer(200, {"version": "0.32.0"})
        return NO_ROUTE

    def chat(self, call: Call) -> Answer:
        body = call.body
        if not isinstance(body, dict) or "max_tokens" not in body:
            return NO_ROUTE
        probe = probe_reply(body)  # the endpoint backend's capability probe: not the author's turn
        if probe is not None:
            return Answer(*probe)
        if not self.gate.is_set():
            with self._waiting_lock:
                self.waiting += 1
            self.gate.wait()
            with self._waiting_lock:
                self.waiting -= 1
        if self.fail_chats or (self.fail_after is not None and self.count >= self.fail_after):
            return Answer(500, {"error": {"message": "the model crashed"}})
        time.sleep(self.delay_s)
        self.count += 1
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
        request = Request(
            body["messages"],
            JsonSchema(schema) if schema else None,
            max_tokens=body["max_tokens"],
            role=infer_role(body),
            tools=body.get("tools"),
            tool_choice=body.get("tool_choice"),
        )
        request.constraint = to_constraint(request.output_type)
        if request.tools:
            raw = self.author.native_answer(request)
            calls = [call.wire() for call in raw.tool_calls]
            reply = chat_reply(
                raw.text, raw.finish_reason, model=self.model, prompt=self.prompt_tokens, cached=60, tool_calls=calls
            )
            reply["usage"]["completion_tokens"] = raw.usage.completion_tokens
            return Answer(200, reply)
        text, finish = self.author.reply(request)
        return Answer(
            200,
            chat_reply(text, finish, model=self.model, prompt=self.prompt_tokens, completion=len(text) // 4, cached=60),
        )

    def close(self) -> None:
        self.gate.set()
        super().close()
