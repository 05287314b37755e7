"""A scripted model for Magnet's control-flow tests: each reply is a function of the request's role.

Policies are plain functions of the request (and a per-role call counter), so a test states
exactly what the critic says, which actions the narrator picks, and so on. ``story_dict`` is the
three-character story definition they run (``agent.magnet.definition.parse_definition`` reads it).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from agent.llm.base import Request
from agent.llm.types import LLMError
from agent.testing.scripted import ScriptedLLM, per_word

Policy = Callable[[Request, int], Any]


def character_of(request: Request) -> str:
    """The character a character-agent or critic request is about."""
    text = request.messages[1]["content"]
    match = re.search(r"Your character is (.+?)\. What does", text) or re.search(r"Proposed action of (.+?): ", text)
    assert match, text[-300:]
    return match.group(1)


def schema_of(request: Request) -> dict[str, Any]:
    """The JSON schema a structured request asks for."""
    assert request.constraint is not None and request.constraint.json_schema is not None, request.role
    return request.constraint.json_schema


def enum_names(request: Request) -> list[str]:
    items = schema_of(request)["properties"]["selected"]["items"]
    return [items["const"]] if "const" in items else items["enum"]


def default_action(request: Request, n: int) -> dict[str, Any]:
    return {"action": f"{character_of(request)} acts (call {n})."}


def default_critic(request: Request, n: int) -> dict[str, Any]:
    reply: dict[str, Any] = {"goal_reached": False}
    props = schema_of(request)["properties"]
    if "verdict" in props:
        reply.update(verdict="accept", feedback="Concrete and in character.")
    if "world_updates" in props:
        name = character_of(request)
        reply["world_updates"] = [{"subject": name, "attribute": "acted", "value": str(n)}]
    return reply


def default_select(request: Request, n: int) -> dict[str, Any]:
    return {"selected": enum_names(request), "rejected_updates": []}


def offered(request: Request) -> dict[str, list[str]]:
    """The critic's update grammar as offered: subject -> the attributes it lists by name (those a
    new snake_case name could not spell; any snake_case name is always allowed)."""
    schema = schema_of(request)
    out: dict[str, list[str]] = {}
    for model in schema.get("$defs", {}).values():
        props = model.get("properties", {})
        if "subject" in props and "attribute" in props:
            subjects = [props["subject"]["const"]] if "const" in props["subject"] else props["subject"]["enum"]
            enums = [o.get("enum", [o["const"]] if "const" in o else []) for o in props["attribute"].get("anyOf", [])]
            for subject in subjects:
                out[subject] = [a for e in enums for a in e]
    return out


def default_paragraph(request: Request, n: int) -> str:
    return (
        f"Rain fell on the old house while the keeper counted {n} lanterns by the door. A gull cried over "
        "the grey harbour and the tide turned slowly. Nobody spoke of the missing will that night. "
        f"Paragraph {n}."
    )


def default_goal(request: Request, n: int) -> dict[str, Any]:
    return {"goal": f"New goal number {n}."}


def default_recap(request: Request, n: int) -> str:
    return f"Recap {n}: the family searched the house for the codicil."


def default_transition(request: Request, n: int) -> str:
    return f"Then, at last, the story turned (transition {n})."


def one_call(policies: dict[str, Policy], request: Request, n: int) -> Any:
    """A reply that carries prose inside JSON, composed from the two-call policies: the paper's narrator
    (the ``narrator-select`` policy's selection, then the ``narrator`` policy's paragraph) and the paper's
    goal generator (the ``goal`` policy's goal, then the ``transition`` policy's paragraph)."""
    props = schema_of(request)["properties"]
    first, prose, field = (
        ("narrator-select", "narrator", "paragraph") if "paragraph" in props else ("goal", "transition", "transition")
    )
    reply = policies[first](request, n)
    if isinstance(reply, LLMError):
        return reply
    reply = {k: v for k, v in reply.items() if k in props}
    text = policies[prose](request, n)
    if isinstance(text, LLMError):
        return text
    return {**reply, field: text[0] if isinstance(text, tuple) else text}


class StoryLLM(ScriptedLLM):
    """Replies by role; every request is kept (with its role) for assertions. A ``narrator`` request
    under a grammar (``narrator_calls = 1``) and a ``goal`` request that asks for the transition too
    (``goal_calls = 1``) are answered by :func:`one_call` from the two-call policies."""

    def __init__(
        self, *, delay: float = 0.0, fail: Callable[[Request, int], LLMError | None] | None = None, **policies: Policy
    ) -> None:
        super().__init__(model="story-model", usage=per_word(100, 40))
        self.policies: dict[str, Policy] = {
            "character": default_action,
            "critic": default_critic,
            "narrator-select": default_select,
            "narrator": default_paragraph,
            "goal": default_goal,
            "transition": default_transition,
            "baseline": default_paragraph,
            "recap": default_recap,
        }
        self.policies.update({k.replace("_", "-"): v for k, v in policies.items()})
        self.delay = delay
        self.fail = fail

    def answer(self, request: Request) -> Any:
        role = request.role or ""
        n = self.counts[role]
        if self.delay:
            time.sleep(self.delay)
        error = self.fail(request, n) if self.fail is not None else None
        if error is not None:
            return error
        if request.constraint is not None and (
            role == "narrator" or (role == "goal" and "transition" in schema_of(request)["properties"])
        ):
            return one_call(self.policies, request, n)
        return self.policies[role](request, n)


def story_dict(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "title": "Test Story",
        "genre": "mystery",
        "goal": "Find the codicil.",
        "words": 400,
        "world": {"codicil_missing": True},
        "characters": [
            {
                "name": "Ann",
                "role": "niece",
                "description": "d",
                "personality": "p",
                "goals": ["g"],
                "location": "library",
                "abilities": ["reads"],
                "relationships": {"Bob": "cousin"},
                "state": {"holding_back_evidence": True},
            },
            {
                "name": "Bob",
                "role": "son",
                "description": "d",
                "personality": "p",
                "goals": ["g"],
                "location": "hall",
                "relationships": {},
            },
            {
                "name": "Cy",
                "role": "lawyer",
                "description": "d",
                "personality": "p",
                "goals": ["g"],
                "location": "study",
                "relationships": {"Ann": "client"},
            },
        ],
    }
    data.update(over)
    return data
