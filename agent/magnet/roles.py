"""The four roles (character agents, critic, narrator, goal generator) as model calls.

Each role is a function of what the paper says it receives. Every call is bounded: a
failed call (truncated or invalid reply, server error) is re-asked at most
``settings.retries`` times, and what happens after that is decided and recorded here,
never silently: a character sits the step out, a critic's silence accepts the action
without effects, a narrator's failed selection keeps every action in character order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.llm import LLM, Completion, LLMError, Request
from agent.magnet import prompts, schemas
from agent.magnet.definition import StoryDefinition
from agent.magnet.settings import MagnetSettings
from agent.magnet.world import Update, WorldGraph
from agent.repetition import measure
from agent.text import split_sentences


@dataclass
class Attempt:
    """One version of a character's action and the critic's word on it."""

    action: str
    verdict: str  # accept | revise | final (revision maximum) | unreviewed (no critic) | critic-failed
    feedback: str = ""


@dataclass
class ActionResult:
    """A character's action for this timestep, after the revision loop."""

    character: str
    attempts: list[Attempt] = field(default_factory=list)
    updates: list[Update] = field(default_factory=list)
    goal_reached: bool = False
    capped: bool = False
    error: str | None = None

    @property
    def action(self) -> str:
        return self.attempts[-1].action if self.attempts else ""

    @property
    def revisions(self) -> int:
        return max(0, len(self.attempts) - 1)

    def as_dict(self) -> dict[str, Any]:
        return {"character": self.character, "action": self.action, "revisions": self.revisions,
                "capped": self.capped, "goal_reached": self.goal_reached, "error": self.error,
                "updates": [asdict(u) for u in self.updates], "attempts": [asdict(a) for a in self.attempts]}


def ask_many(llm: LLM, requests: Sequence[Request], retries: int) -> list[Completion | LLMError]:
    """Run requests concurrently; re-ask the failed ones (together) up to ``retries`` times."""
    results: list[Completion | LLMError] = list(llm.generate_many(requests, return_exceptions=True))
    for _ in range(retries):
        failed = [i for i, r in enumerate(results) if isinstance(r, LLMError)]
        if not failed:
            break
        again = llm.generate_many([_fresh(requests[i]) for i in failed], return_exceptions=True)
        for i, result in zip(failed, again, strict=True):
            results[i] = result
    return results


def _fresh(request: Request) -> Request:
    return Request(request.messages, request.output_type, request.temperature, request.max_tokens,
                   request.min_tokens, request.stop, request.seed, request.role)


def _updates(parsed: Any) -> list[Update]:
    return [Update(u.concerns, u.key, u.value) for u in getattr(parsed, "world_updates", [])]


@dataclass
class Scene:
    """What every role sees this timestep."""

    story: StoryDefinition
    world: WorldGraph | None
    goal: str
    recent: list[str]
    ending: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.story.names)

    def flat(self) -> dict[str, Any] | None:
        return self.world.flat() if self.world is not None else None

    def view(self, name: str) -> dict[str, Any] | None:
        return self.world.view(name) if self.world is not None else None


def propose_actions(llm: LLM, scene: Scene, settings: MagnetSettings) -> list[ActionResult]:
    """Every character proposes an action; the critic sends vague ones back, up to the maximum.

    Each round batches all characters still under revision (then all their reviews), so a
    server handles the characters concurrently.
    """
    story = scene.story
    results = {name: ActionResult(name) for name in scene.names}
    messages = {c.name: prompts.character(story, c, scene.goal, scene.recent, scene.view(c.name), scene.ending,
                                          with_effects=not settings.critic,
                                          with_state=settings.structured_state)
                for c in story.characters}
    action_type = schemas.action_type(settings, scene.names)
    pending = list(scene.names)
    rounds = settings.max_revisions + 1 if settings.critic else 1
    for round_no in range(rounds):
        final = round_no == rounds - 1
        replies = ask_many(llm, [Request(messages[n], action_type, temperature=settings.character_temperature,
                                         max_tokens=settings.action_tokens, role="character") for n in pending],
                           settings.retries)
        proposed: list[str] = []
        for name, reply in zip(pending, replies, strict=True):
            result = results[name]
            if isinstance(reply, LLMError):
                result.error = f"action failed: {str(reply).splitlines()[0]}"
                if result.attempts:  # keep the last version, unreviewed
                    result.error += " (kept the previous version)"
                continue
            text = " ".join(reply.parsed.action.split())
            if not settings.critic:
                result.attempts.append(Attempt(text, "unreviewed"))
                result.updates = _updates(reply.parsed) if settings.structured_state else []
                result.goal_reached = bool(reply.parsed.goal_reached)
                continue
            result.attempts.append(Attempt(text, "pending"))
            proposed.append(name)
        if not settings.critic:
            break
        pending = review(llm, scene, settings, [results[n] for n in proposed], final=final, messages=messages)
        if not pending:
            break
    return [results[n] for n in scene.names if results[n].attempts]


def review(llm: LLM, scene: Scene, settings: MagnetSettings, results: list[ActionResult], *, final: bool,
           messages: dict[str, list]) -> list[str]:
    """The critic judges each latest attempt; returns the characters sent back to revise."""
    story = scene.story
    critic_type = schemas.critic_type(settings, scene.names, final=final)
    requests = [Request(prompts.critic(story, story.character(r.character), r.action, scene.goal, scene.recent,
                                       scene.flat(), final=final),
                        critic_type, temperature=settings.critic_temperature, max_tokens=settings.critic_tokens,
                        role="critic") for r in results]
    again: list[str] = []
    for result, reply in zip(results, ask_many(llm, requests, settings.retries), strict=True):
        attempt = result.attempts[-1]
        if isinstance(reply, LLMError):
            attempt.verdict = "critic-failed"
            attempt.feedback = str(reply).splitlines()[0]
            continue
        parsed = reply.parsed
        verdict = "final" if final else parsed.verdict
        attempt.verdict = verdict
        attempt.feedback = " ".join(getattr(parsed, "feedback", "").split())
        if verdict == "revise":
            feedback = attempt.feedback or "The action is too vague; make it concrete and move the goal forward."
            messages[result.character] = prompts.revision(messages[result.character], attempt.action, feedback)
            again.append(result.character)
            continue
        result.capped = final and settings.max_revisions > 0
        result.updates = _updates(parsed)
        result.goal_reached = bool(parsed.goal_reached)
    return again


@dataclass
class Narration:
    order: list[str]
    paragraph: str
    selection_fallback: str | None = None
    trimmed: bool = False


def narrate(llm: LLM, scene: Scene, settings: MagnetSettings, actions: Sequence[ActionResult], *,
            budget: tuple[int, int] | None = None) -> Narration:
    """The narrator selects and orders the fitting actions, then writes the paragraph
    (``budget``: ``(min_tokens, max_tokens)`` instead of the settings', for the last one)."""
    min_tokens, max_tokens = budget or (settings.paragraph_min_tokens, settings.paragraph_tokens)
    by_name = {a.character: a.action for a in actions}
    order, fallback = select(llm, scene, settings, by_name)
    ordered = [(name, by_name[name]) for name in order]
    text, trimmed = write_prose(llm, prompts.paragraph(scene.story, ordered, scene.goal, scene.recent,
                                                      scene.flat(), scene.ending),
                                settings, temperature=settings.narrator_temperature,
                                max_tokens=max_tokens, min_tokens=min_tokens, role="narrator")
    return Narration(order, text, fallback, trimmed)


def select(llm: LLM, scene: Scene, settings: MagnetSettings,
           actions: Mapping[str, str]) -> tuple[list[str], str | None]:
    names = tuple(actions)
    if len(names) == 1:
        return list(names), None
    request = Request(prompts.selection(scene.story, actions, scene.goal, scene.recent, scene.flat(), scene.ending),
                      schemas.selection_type(names), temperature=settings.narrator_temperature,
                      max_tokens=settings.selection_tokens, role="narrator-select")
    reply = ask_many(llm, [request], settings.retries)[0]
    if isinstance(reply, LLMError):
        return list(names), f"selection failed, kept every action: {str(reply).splitlines()[0]}"
    order = list(dict.fromkeys(reply.parsed.selected))  # the grammar cannot forbid repeats; drop them here
    return order, None


def write_prose(llm: LLM, messages: list, settings: MagnetSettings, *, temperature: float, max_tokens: int,
                min_tokens: int | None, role: str) -> tuple[str, bool]:
    """A plain-text paragraph; one cut at ``max_tokens`` is trimmed to its last whole sentence.
    An empty reply counts as a failed call (re-asked within ``settings.retries``)."""
    request = Request(messages, None, temperature=temperature, max_tokens=max_tokens, min_tokens=min_tokens,
                      role=role)
    for _ in range(settings.retries + 1):
        reply = ask_many(llm, [_fresh(request)], settings.retries)[0]
        if isinstance(reply, LLMError):
            raise reply
        text, trimmed = _paragraph_of(reply)
        if text:
            return _unrepeated(llm, request, settings, text, trimmed)
    raise LLMError(f"the {role} wrote an empty paragraph {settings.retries + 1} times")


def _paragraph_of(reply: Completion) -> tuple[str, bool]:
    text = clean_paragraph(reply.text)
    if reply.finish_reason == "length":
        sentences = split_sentences(text)
        if len(sentences) > 1:
            return " ".join(sentences[:-1]), True
    return text, False


def _unrepeated(llm: LLM, request: Request, settings: MagnetSettings, text: str, trimmed: bool) -> tuple[str, bool]:
    """The repetition guard: a paragraph that repeats itself is asked for once more, with the
    repeated passage quoted and a firmer penalty; the less repetitive of the two is kept (both
    calls are in the ledger, the second with the guard's feedback)."""
    if not settings.repetition_guard:
        return text, trimmed
    found = measure(text)
    if not found.exceeds(settings.repetition_max_rate, settings.repetition_max_span):
        return text, trimmed
    retry = Request([*request.messages, {"role": "assistant", "content": text},
                     {"role": "user", "content": found.feedback()}], None, temperature=request.temperature,
                    max_tokens=request.max_tokens, min_tokens=request.min_tokens, role=request.role,
                    sampling=settings.sampling_for(request.role).stronger())
    reply = ask_many(llm, [retry], 0)[0]
    if isinstance(reply, LLMError):
        return text, trimmed
    second, second_trimmed = _paragraph_of(reply)
    if second and measure(second).rate < found.rate:
        return second, second_trimmed
    return text, trimmed


def clean_paragraph(text: str) -> str:
    """One paragraph of prose: stray headings and blank-line splits are joined, spaces kept single."""
    lines = [ln.strip() for ln in text.strip().splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    return " ".join(" ".join(lines).split())


def next_goal(llm: LLM, scene: Scene, settings: MagnetSettings, prior_goals: Sequence[str],
              status: str) -> tuple[str, str]:
    """A new goal and the transition paragraph that joins the story to it."""
    from grammars.magnet import NextGoal

    reply = ask_many(llm, [Request(prompts.goal(scene.story, scene.goal, prior_goals, scene.recent, scene.flat(),
                                                status),
                                   NextGoal, temperature=settings.goal_temperature, max_tokens=settings.goal_tokens,
                                   role="goal")], settings.retries)[0]
    if isinstance(reply, LLMError):
        raise reply
    goal = " ".join(reply.parsed.goal.split())
    text, _ = write_prose(llm, prompts.transition(scene.story, scene.recent, goal, status), settings,
                          temperature=settings.goal_temperature, max_tokens=settings.transition_tokens,
                          min_tokens=None, role="transition")
    return goal, text
