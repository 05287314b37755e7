"""The four roles (character agents, critic, narrator, goal generator) as model calls.

Each role is a function of what the paper says it receives. Every call is bounded: a
failed call (truncated or invalid reply, server error) is re-asked at most
``settings.retries`` times, and what happens after that is decided here and recorded in the
step record (``Scene.failures``), never silently: a character sits the step out, a critic's
silence accepts the action without effects, a narrator's failed selection falls back to the
first action alone (so does a failed one-call narration, ``narrator_calls = 1``, the first action
then told by the plain paragraph call), a failed goal call keeps the current goal.

The narrator and the goal generator each take one call or two (``narrator_calls``,
``goal_calls``): the paper's one call returns the selection and the paragraph, or the goal and the
transition, in one grammar-constrained reply; fabula's default asks the JSON part first and writes
the prose as plain text in a second call.

Every request fits the model's context (the budget NstAgent uses, ``agent.llm.budget``): a
prompt that would not leave its reply room gives way in a fixed order, long-range memory
first (recalled passages, oldest first; then the recap), then the recent window (oldest
paragraph first, one always stays); each step that gives way is a ``budget`` row of the
ledger and is listed in the step record. Only then is ``max_tokens`` clamped, or, with
nothing left to give, the run stops with one line naming the context (and stays resumable).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from agent.llm import LLM, LLMError, Request
from agent.llm.budget import Budget
from agent.llm.types import Message
from agent.magnet import prompts, schemas
from agent.magnet.asking import ask_many, min_reply
from agent.magnet.definition import StoryDefinition
from agent.magnet.prompts import NO_MEMORY, Candidate, Memory
from agent.magnet.prose import ask_with_prose, clean_paragraph, write_prose
from agent.magnet.settings import MagnetSettings
from agent.magnet.world import Update, WorldGraph


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
        return {
            "character": self.character,
            "action": self.action,
            "revisions": self.revisions,
            "capped": self.capped,
            "goal_reached": self.goal_reached,
            "error": self.error,
            "updates": [asdict(u) for u in self.updates],
            "attempts": [asdict(a) for a in self.attempts],
        }


GIVE_WAY = ("drop_recalled_paragraph", "drop_recap", "shorten_recent_window")
"""What a step's prompts give up when the context is tight, in this order."""


def _updates(parsed: Any, world: WorldGraph | None) -> list[Update]:
    """The reply's world updates, one per variable: a small model may write the same variable
    twice in one reply (``mood`` and ``ann_mood`` of Ann); the later write is its last word, and
    committing both would log two commits for one change."""
    updates = [Update(u.subject, u.attribute, u.value) for u in getattr(parsed, "world_updates", [])]
    if world is None:
        return updates
    last = {world.resolve(u.subject, u.attribute): i for i, u in enumerate(updates)}
    return [u for i, u in enumerate(updates) if last[world.resolve(u.subject, u.attribute)] == i]


def _first_line(error: Exception) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0]


@dataclass
class Scene:
    """What every role sees this timestep, and the failures the step record must show."""

    story: StoryDefinition
    world: WorldGraph | None
    goal: str
    recent: list[str]
    ending: str = ""
    memory: Memory = NO_MEMORY
    failures: list[dict[str, Any]] = field(default_factory=list)
    budget: Budget | None = None
    """The run's context budget (None: nothing is fitted)."""
    gave_way: list[str] = field(default_factory=list)
    """What this step's prompts gave up to fit the context, in order (:data:`GIVE_WAY`)."""
    step: int = 0

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.story.names)

    def give_way(self) -> str | None:
        """Free room in this step's prompts (the budget's ``shrink``): memory first, then the
        recent window; what gave way stays given up for the rest of the step."""
        memory = self.memory
        if memory.recalled:
            self.memory, action = replace(memory, recalled=memory.recalled[1:]), GIVE_WAY[0]
        elif memory.recap:
            self.memory, action = replace(memory, recap=""), GIVE_WAY[1]
        elif len(self.recent) > 1:
            self.recent, action = self.recent[1:], GIVE_WAY[2]
        else:
            return None
        self.gave_way.append(action)
        return action

    def request(
        self,
        build: Callable[[], list[Message]],
        output_type: Any,
        *,
        temperature: float,
        max_tokens: int,
        role: str,
        min_tokens: int | None = None,
    ) -> Request:
        """The request ``build()`` makes from the scene, fitted to the context (see the module doc)."""
        if self.budget is not None:
            max_tokens = self.budget.fit(
                build,
                max_tokens=max_tokens,
                min_output=min_reply(output_type, min_tokens),
                shrink=self.give_way,
                what=f"the {role} request of step {self.step}",
            )
            if min_tokens is not None:
                min_tokens = min(min_tokens, max_tokens - 1) or None
        return Request(
            build(), output_type, temperature=temperature, max_tokens=max_tokens, min_tokens=min_tokens, role=role
        )

    def fail(self, role: str, error: Exception | str, outcome: str, character: str | None = None) -> None:
        """Record a call that failed after its retries, and what the step did instead."""
        text = error if isinstance(error, str) else _first_line(error)
        self.failures.append({"role": role, "character": character, "error": text, "outcome": outcome})


def propose_actions(llm: LLM, scene: Scene, settings: MagnetSettings) -> list[ActionResult]:
    """Every character proposes an action; the critic sends vague ones back, up to the maximum.

    Each round batches all characters still under revision (then all their reviews), so a
    server handles the characters concurrently. Every character's result is returned, in
    story order; one without attempts sat the step out (its failure is in ``scene.failures``).
    """
    story = scene.story
    results = {name: ActionResult(name) for name in scene.names}
    revisions: dict[str, list[Message]] = {name: [] for name in scene.names}

    def build(name: str) -> Callable[[], list[Message]]:
        char = story.character(name)
        return lambda: [
            *prompts.character(
                story,
                char,
                scene.goal,
                scene.recent,
                scene.world,
                scene.ending,
                with_effects=not settings.critic,
                memory=scene.memory,
            ),
            *revisions[name],
        ]

    action_types = {
        n: schemas.action_type(settings, schemas.catalogue(scene.world, n) if scene.world else None)
        for n in scene.names
    }
    pending = list(scene.names)
    rounds = settings.max_revisions + 1 if settings.critic else 1
    for round_no in range(rounds):
        final = round_no == rounds - 1
        replies = ask_many(
            llm,
            [
                scene.request(
                    build(n),
                    action_types[n],
                    temperature=settings.character_temperature,
                    max_tokens=settings.ceiling(settings.action_tokens),
                    role="character",
                )
                for n in pending
            ],
            settings.retries,
            scene.budget,
        )
        proposed: list[str] = []
        for name, reply in zip(pending, replies, strict=True):
            result = results[name]
            if isinstance(reply, LLMError):
                result.error = f"action failed: {_first_line(reply)}"
                outcome = "kept the previous version, unreviewed" if result.attempts else "sat this step out"
                if result.attempts:
                    result.error += " (kept the previous version)"
                scene.fail("character", reply, outcome, name)
                continue
            text = " ".join(reply.parsed.action.split())
            if not settings.critic:
                result.attempts.append(Attempt(text, "unreviewed"))
                result.updates = _updates(reply.parsed, scene.world) if settings.structured_state else []
                result.goal_reached = bool(reply.parsed.goal_reached)
                continue
            result.attempts.append(Attempt(text, "pending"))
            proposed.append(name)
        if not settings.critic:
            break
        pending = review(llm, scene, settings, [results[n] for n in proposed], final=final, revisions=revisions)
        if not pending:
            break
    return [results[n] for n in scene.names]


def review(
    llm: LLM,
    scene: Scene,
    settings: MagnetSettings,
    results: list[ActionResult],
    *,
    final: bool,
    revisions: dict[str, list[Message]],
) -> list[str]:
    """The critic judges each latest attempt; returns the characters sent back to revise (their
    attempt and the feedback appended to ``revisions``)."""
    story = scene.story
    critic_type = schemas.critic_type(settings, schemas.catalogue(scene.world) if scene.world else None, final=final)

    def build(r: ActionResult) -> Callable[[], list[Message]]:
        return lambda: prompts.critic(
            story,
            story.character(r.character),
            r.action,
            scene.goal,
            scene.recent,
            scene.world,
            final=final,
            memory=scene.memory,
            example=settings.critic_example,
            paper_inputs=settings.role_inputs == "paper",
        )

    requests = [
        scene.request(
            build(r),
            critic_type,
            temperature=settings.critic_temperature,
            max_tokens=settings.ceiling(settings.critic_tokens),
            role="critic",
        )
        for r in results
    ]
    again: list[str] = []
    for result, reply in zip(results, ask_many(llm, requests, settings.retries, scene.budget), strict=True):
        attempt = result.attempts[-1]
        if isinstance(reply, LLMError):
            attempt.verdict = "critic-failed"
            attempt.feedback = _first_line(reply)
            scene.fail("critic", reply, "accepted the action without world updates", result.character)
            continue
        parsed = reply.parsed
        verdict = "final" if final else parsed.verdict
        attempt.verdict = verdict
        attempt.feedback = " ".join(getattr(parsed, "feedback", "").split())
        if verdict == "revise":
            feedback = attempt.feedback or "The action is too vague; make it concrete and move the goal forward."
            if scene.world is not None:  # the critic sees every secret; the character must not
                feedback = scene.world.redact(feedback, result.character)
            revisions[result.character] = prompts.revision(revisions[result.character], attempt.action, feedback)
            again.append(result.character)
            continue
        result.capped = final and settings.max_revisions > 0
        result.updates = _updates(parsed, scene.world)
        result.goal_reached = bool(parsed.goal_reached)
    return again


@dataclass
class Narration:
    order: list[str]
    paragraph: str
    selection_fallback: str | None = None
    trimmed: bool = False
    rejected: list[dict[str, Any]] = field(default_factory=list)
    """Proposed updates of selected actions that the narrator rejected as conflicting."""


def candidates(actions: Sequence[ActionResult]) -> list[Candidate]:
    """Each action with its proposed updates (numbered ``u1``, ``u2``... across the step)."""
    out, n = [], 0
    for a in actions:
        ups = []
        for u in a.updates:
            n += 1
            ups.append((f"u{n}", u.subject, u.attribute, u.value))
        out.append(Candidate(a.character, a.action, ups, a.goal_reached))
    return out


def narrate(
    llm: LLM,
    scene: Scene,
    settings: MagnetSettings,
    actions: Sequence[ActionResult],
    *,
    budget: tuple[int, int] | None = None,
    close_after_words: int | None = None,
) -> Narration:
    """The narrator selects and orders the fitting actions (rejecting conflicting updates), then
    writes the paragraph (``budget``: ``(min_tokens, max_tokens)`` instead of the settings';
    ``close_after_words``: it ends at its first sentence end past that many words)."""
    min_tokens: int | None
    min_tokens, max_tokens = budget or (settings.paragraph_min_tokens, settings.paragraph_tokens)
    if not settings.paragraph_floor:
        min_tokens = None
    offered = candidates(actions)
    if settings.narrator_calls == 1:
        told = narrate_at_once(llm, scene, settings, offered, max_tokens)
        if told is not None:
            order, rejected_ids, text = told
            return Narration(order, text, None, False, _vetted(actions, offered, order, rejected_ids))
        order, rejected_ids = [offered[0].character], set()
        fallback: str | None = scene.failures[-1]["outcome"]
    else:
        order, rejected_ids, fallback = select(llm, scene, settings, offered)
    rejected = _vetted(actions, offered, order, rejected_ids)
    ordered = [(name, {a.character: a for a in actions}[name].action) for name in order]
    request = scene.request(
        lambda: prompts.paragraph(
            scene.story,
            ordered,
            scene.goal,
            scene.recent,
            scene.world,
            scene.ending,
            scene.memory,
            paper_inputs=settings.role_inputs == "paper",
        ),
        None,
        temperature=settings.narrator_temperature,
        max_tokens=settings.ceiling(max_tokens),
        min_tokens=min_tokens,
        role="narrator",
    )
    text, trimmed = write_prose(
        llm,
        request.messages,
        settings,
        temperature=request.temperature,
        max_tokens=request.max_tokens,
        min_tokens=request.min_tokens,
        role="narrator",
        budget=scene.budget,
        close_after_words=close_after_words,
    )
    return Narration(order, text, fallback, trimmed, rejected)


def _vetted(
    actions: Sequence[ActionResult], offered: Sequence[Candidate], order: list[str], rejected_ids: set[str]
) -> list[dict[str, Any]]:
    """The rejected updates of selected actions, as the step record lists them; every rejected
    update is dropped from what will be committed."""
    by_name = {a.character: a for a in actions}
    rejected = [
        {"id": uid, "character": c.character, "subject": s, "attribute": a, "value": v}
        for c in offered
        for uid, s, a, v in c.updates
        if uid in rejected_ids and c.character in order
    ]
    for c in offered:  # drop the rejected updates from what will be committed
        keep = [i for i, (uid, *_rest) in enumerate(c.updates) if uid not in rejected_ids]
        if len(keep) != len(c.updates):
            result = by_name[c.character]
            result.updates = [result.updates[i] for i in keep]
    return rejected


def _narrator_messages(
    build: Callable[..., list[Message]],
    scene: Scene,
    settings: MagnetSettings,
    offered: Sequence[Candidate],
    *,
    vets: bool,
) -> list[Message]:
    """The narrator's request (``prompts.selection`` or ``prompts.narration``) over this step's scene:
    the same inputs for both, the personas left out under ``role_inputs = "paper"`` (Magnet §3.2)."""
    return build(
        scene.story,
        offered,
        scene.goal,
        scene.recent,
        scene.world,
        scene.ending,
        scene.memory,
        vets=vets,
        paper_inputs=settings.role_inputs == "paper",
    )


def narrate_at_once(
    llm: LLM, scene: Scene, settings: MagnetSettings, offered: Sequence[Candidate], paragraph_tokens: int
) -> tuple[list[str], set[str], str] | None:
    """The paper's narrator (``narrator_calls = 1``): one grammar-constrained reply selects and orders
    the actions (from those offered, each at most once) and writes the paragraph, within
    ``selection_tokens + paragraph_tokens``. Returns ``(order, rejected update ids, paragraph)``, or
    None when the call still fails after its retries (recorded: the caller falls back to the first
    action alone, told by the plain paragraph call)."""
    names = tuple(c.character for c in offered)
    vets = settings.narrator_rejects_updates
    ids = tuple(uid for c in offered for uid, *_rest in c.updates) if vets else None
    request = scene.request(
        lambda: _narrator_messages(prompts.narration, scene, settings, offered, vets=vets),
        schemas.narration_type(names, ids),
        temperature=settings.narrator_temperature,
        max_tokens=settings.ceiling(settings.selection_tokens + paragraph_tokens),
        role="narrator",
    )
    reply = ask_with_prose(llm, request, settings, "paragraph", scene.budget)
    if isinstance(reply, LLMError):
        note = f"narration failed {settings.retries + 1} time(s), told the first action alone ({names[0]})"
        scene.fail("narrator", reply, note)
        return None
    order = [n for n in dict.fromkeys(reply.parsed.selected) if n in names]  # no repeats, only what was offered
    if not order:
        scene.fail("narrator", "selected no offered action", f"told the first action alone ({names[0]})")
        return None
    return order, set(getattr(reply.parsed, "rejected_updates", [])), clean_paragraph(reply.parsed.paragraph)


def select(
    llm: LLM, scene: Scene, settings: MagnetSettings, offered: Sequence[Candidate]
) -> tuple[list[str], set[str], str | None]:
    """``(order, rejected update ids, fallback note)``. A selection that still fails after its
    retries falls back to the first action alone (committing every action would merge
    updates nobody checked for conflicts); the fallback is recorded."""
    names = tuple(c.character for c in offered)
    vets = settings.narrator_rejects_updates
    if len(names) == 1 and not (vets and any(c.updates for c in offered)):
        return list(names), set(), None
    ids = tuple(uid for c in offered for uid, *_rest in c.updates) if vets else ()
    request = scene.request(
        lambda: _narrator_messages(prompts.selection, scene, settings, offered, vets=vets),
        schemas.selection_type(names, ids),
        temperature=settings.narrator_temperature,
        max_tokens=settings.ceiling(settings.selection_tokens),
        role="narrator-select",
    )
    reply = ask_many(llm, [request], settings.retries, scene.budget)[0]
    if isinstance(reply, LLMError):
        note = f"selection failed {settings.retries + 1} time(s), kept the first action alone ({names[0]})"
        scene.fail("narrator-select", reply, note)
        return [names[0]], set(), note
    order = list(dict.fromkeys(reply.parsed.selected))  # the grammar cannot forbid repeats; drop them here
    return order, set(reply.parsed.rejected_updates), None


def next_goal(
    llm: LLM, scene: Scene, settings: MagnetSettings, prior_goals: Sequence[str], status: str, beat: str | None = None
) -> tuple[str, str] | None:
    """A new goal and the transition paragraph that joins the story to it; ``None`` (recorded in
    ``scene.failures``) when the goal call fails after its retries: the current goal stands.

    ``goal_calls = 1`` (the paper's): one reply carries the goal and the transition, both written
    from what the goal call sees (the world state among it), within ``goal_tokens + transition_tokens``."""
    from grammars.magnet import NextGoal, NextGoalTransition

    together = settings.goal_calls == 1
    request = scene.request(
        lambda: prompts.goal(
            scene.story,
            scene.goal,
            prior_goals,
            scene.recent,
            scene.world,
            status,
            beat=beat,
            memory=scene.memory,
            transition=together,
        ),
        NextGoalTransition if together else NextGoal,
        temperature=settings.goal_temperature,
        max_tokens=settings.ceiling(settings.goal_tokens + (settings.transition_tokens if together else 0)),
        role="goal",
    )
    if together:
        reply = ask_with_prose(llm, request, settings, "transition", scene.budget)
    else:
        reply = ask_many(llm, [request], settings.retries, scene.budget)[0]
    if isinstance(reply, LLMError):
        scene.fail("goal", reply, f"kept the current goal ({status} goal not generated)")
        return None
    goal = " ".join(reply.parsed.goal.split())
    if together:
        return goal, clean_paragraph(reply.parsed.transition)
    request = scene.request(
        lambda: prompts.transition(scene.story, scene.recent, goal, status, scene.world, scene.memory),
        None,
        temperature=settings.goal_temperature,
        max_tokens=settings.ceiling(settings.transition_tokens),
        role="transition",
    )
    text, _ = write_prose(
        llm,
        request.messages,
        settings,
        temperature=request.temperature,
        max_tokens=request.max_tokens,
        min_tokens=None,
        role="transition",
        budget=scene.budget,
    )
    return goal, text
