"""A server of several models that answers Magnet's requests as the scripted story model does, and keeps
which model each role's requests named: per-role models tested over HTTP (``fabula write``, ``batch``,
``repro``)."""

from __future__ import annotations

import threading
from typing import Any

from agent.llm.constraints import JsonSchema
from agent.magnet import prompts
from agent.store import RunStore
from agent.testing.replies import chat_reply, model_list, probe_reply
from agent.testing.server import NO_ROUTE, Answer, Call, FakeServer
from agent.testing.story_llm import StoryLLM

RUN_MODEL, OTHER = "run-model", "other-model"


def role_of(body: dict[str, Any]) -> str:
    """A Magnet request's role, from its instructions as a server sees them: the system message, or the
    user turn's start for the critic, the narrator, the goal and the transition (their system message
    is the story)."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    if system.startswith(prompts.CHARACTER_SYSTEM[:40]):
        return "character"
    if system.startswith(prompts.RECAP_SYSTEM[:40]):
        return "recap"
    if user.startswith("You are the critic"):
        return "critic"
    if user.startswith(prompts.SELECT_ONLY_SYSTEM[:-1]):
        return "narrator-select"
    if user.startswith(prompts.GOAL_SYSTEM[:40]):
        return "goal"
    if "transition paragraph" in user.split("\n\n")[0]:
        return "transition"
    assert user.startswith("You are the narrator"), user[:80]
    return "narrator"


class RoleServer(FakeServer):
    """Serves ``models`` (vLLM-shaped), answering each Magnet request as the scripted story model does,
    with the model the request named; ``asked`` keeps (role, requested model) of every story request."""

    def __init__(self, *models: str) -> None:
        self.models = models
        self.author = StoryLLM()
        self.asked: list[tuple[str, str]] = []
        self.fail_after: int | None = None
        """Refuse every story request (HTTP 400) once this many were answered (a server that breaks)."""
        self._lock = threading.Lock()
        super().__init__({"GET *": self.get, "POST /v1/chat/completions": self.chat})

    def get(self, call: Call) -> Answer:
        if call.path.startswith("/v1/models"):
            entries = [{"id": m, "object": "model", "owned_by": "vllm", "max_model_len": 32768} for m in self.models]
            return Answer(200, model_list(*entries))
        if call.path == "/version":
            return Answer(200, {"version": "0.32.0"})
        return NO_ROUTE

    def chat(self, call: Call) -> Answer:
        body = call.body
        probe = probe_reply(body)
        if probe is not None:
            return Answer(*probe)
        if self.fail_after is not None and len(self.asked) >= self.fail_after:
            return Answer(400, {"error": {"message": "the model is gone"}})
        role = role_of(body)
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
        with self._lock:
            self.asked.append((role, body["model"]))
            reply = self.author.generate(
                body["messages"],
                JsonSchema(schema) if schema else None,
                temperature=0.0,
                max_tokens=body["max_tokens"],
                role=role,
            )
        return Answer(200, chat_reply(reply.text, model=body["model"], prompt=100, completion=len(reply.text) // 4))


def by_own_model(asked: list[tuple[str, str]], roles: set[str], own: str) -> bool:
    """Whether exactly the requests of ``roles`` named ``own`` (and every other the run's model)."""
    return all((model == own) == (role in roles) and model in (own, RUN_MODEL) for role, model in asked)


def ledger(run) -> list[tuple[str, str]]:
    with RunStore.open(run, readonly=True) as store:
        return [(row["role"], row["model"]) for row in store.query("SELECT role, model FROM llm_calls ORDER BY id")]


def stored_roles(run) -> Any:
    with RunStore.open(run, readonly=True) as store:
        return store.info().config["llm"].get("roles")
