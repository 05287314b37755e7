"""Every Magnet prompt, ordered for the prefix cache.

Order inside each prompt: what never changes (the story premise), then what drifts slowly (the
running recap, the personas drawn from the world graph), then what changes every step (recalled
earlier passages, recent paragraphs, the world state, the goal, the action under review, the
task). No counter, timestamp or step number appears before the task.

Within a step, the critic and the narrator (its selection and its paragraph, or its one call)
get the story as their system message, the same bytes for each (:func:`scene`: every secret
marked), and their own instructions at the start of the user turn, so each call reuses the cache
the one before left: the critic's reviews, the selection and the paragraph share everything up to
the current goal. A character agent keeps its instructions as its system message: its story is
its own view, which no other role shares. The goal generator, the transition and the recap run
between steps on other blocks and keep their instructions first.

Under ``role_inputs = "paper"`` each role gets the inputs Magnet §3.2 lists for it and no more: the
critic its own context (the story's definition, the world state and the goal as its system message, the
same bytes for every review of a step; the acting character's persona and the action in the user turn),
without the story's paragraphs, recalled passages, recap or the other personas; the narrator the scene
without the personas. The character agent and the goal generator already get what the paper lists.

What a role sees of the world is decided here from :meth:`WorldGraph.entries`: a character
agent gets its own view (never another character's secrets); the critic, narrator and goal
generator get everything, with secrets marked as such.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.llm.types import Message
from agent.magnet.definition import Character, StoryDefinition
from agent.magnet.world import WORLD, Entry, WorldGraph

CHARACTER_SYSTEM = (
    "You play one character in a story written by several agents. Propose what your character does next: "
    "one concrete, specific action in one or two sentences, in the third person, that fits the character's "
    "personality, abilities and current location, and that moves the current story goal forward. Do not narrate "
    "other characters' actions. Do not repeat an action already told in the story. What is marked as your secret "
    "is known to you alone."
)
CRITIC_SYSTEM = (
    "You are the critic of a multi-agent story. Judge a character's proposed action: is it relevant to the "
    "current goal, specific, consistent with the character and the scene, plausible and new? Ask for a revision "
    "(verdict revise, with one sentence of feedback) if it is vague, out of character, implausible, repetitive or "
    "does not advance the goal; otherwise accept it. For an accepted action, list the changes it makes to the "
    "world state, at most four. Each change names its subject (world, or the character the variable belongs to), "
    "the attribute (one the subject already has, to change it, or a new snake_case name) and the new value, for "
    'example {"subject": "Lucia Ashcombe", "attribute": "holding_back_evidence", "value": "false"} or '
    '{"subject": "Lucia Ashcombe", "attribute": "location", "value": "the study"}. A relationship is the '
    "attribute relationship_with_<name> of the character who holds it. Say whether the action completes the "
    "current goal."
)
CRITIC_STATELESS_SYSTEM = (
    "You are the critic of a multi-agent story. Judge a character's proposed action: is it relevant to the "
    "current goal, specific, consistent with the character and the scene, plausible and new? Ask for a revision "
    "(verdict revise, with one sentence of feedback) if it is vague, out of character, implausible, repetitive or "
    "does not advance the goal; otherwise accept it, and say whether it completes the current goal."
)
_EXAMPLE_REPLY = {
    "verdict": "accept",
    "feedback": "Searching the study is concrete and brings Lucia closer to the hidden will.",
    "world_updates": [{"subject": "Lucia Ashcombe", "attribute": "location", "value": "the study"}],
    "goal_reached": False,
}
CRITIC_EXAMPLE = " A complete reply looks like this: " + json.dumps(_EXAMPLE_REPLY)
CRITIC_STATELESS_EXAMPLE = " A complete reply looks like this: " + json.dumps(
    {k: v for k, v in _EXAMPLE_REPLY.items() if k != "world_updates"}
)
"""Appended to the critic's instructions when ``critic_example`` is on (the small profile): with it
the tiny model writes a sentence of feedback instead of digits and junk that run to its limit."""
SELECT_SYSTEM = (
    "You are the narrator of a story. Several characters have each proposed an action, with the changes it would "
    "make to the world state and whether it would complete the current goal. Choose the actions that fit the "
    "current scene best and do not contradict each other, and put them in the order in which they happen. Answer "
    "with the characters' names, and list the ids of any proposed world updates that conflict with the state or "
    "with each other and must not be applied."
)
SELECT_ONLY_SYSTEM = SELECT_SYSTEM.split(", and list the ids")[0] + "."
"""The paper's narrator (Section 3): it selects and orders the actions; vetting single world updates is fabula's."""
GOAL_SYSTEM = (
    "You plan the next story goal of a multi-agent story. Give one concrete objective that the characters can "
    "reach within a few scenes, that follows from what has happened, that is not a repeat of any earlier goal, "
    "and that lets the story develop further. One sentence."
)
RECAP_SYSTEM = (
    "You keep the running recap of a long story. Rewrite the recap so that it includes the new paragraphs: who "
    "did what, where everyone is, what was revealed, what is unresolved. Plain prose, at most eight sentences."
)

GOAL_STATUS_TEXT = {
    "complete": "The previous goal has just been completed. Give the next goal.",
    "stalled": "The previous goal has stalled: the characters have not reached it for many steps. Replace it "
    "with a different goal that gets the story moving again.",
    "shift": "The story needs a change of direction. Give a goal that moves the story into a new domain (for "
    "example from a professional conflict into a family or personal one), still with these characters.",
    "conclude": "The story is close to its end. Give a concluding goal that resolves the main conflict and the "
    "high-level story goal, so that the story can end within a few paragraphs.",
}


@dataclass(frozen=True)
class Memory:
    """Long-range memory for one step: the running recap and recalled earlier paragraphs."""

    recap: str = ""
    recalled: list[str] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    """Failed memory calls (the recap), for the step record."""


NO_MEMORY = Memory()


def voice(story: StoryDefinition) -> str:
    """Point of view, tense and style as one instruction (the writer's control, not hard-coded)."""
    tense = f"{story.tense} tense"
    if story.pov == "first":
        pov = f'first person, narrated by {story.focal} ("I")'
    elif story.pov == "third-limited":
        pov = f"third person limited to {story.focal}: only what {story.focal} perceives, knows and feels"
    else:
        pov = "third person omniscient"
    out = f"Write in the {tense}, {pov}."
    if story.style:
        out += f" Style: {story.style}"
    return out


def narrator_system(story: StoryDefinition) -> str:
    return (
        "You are the narrator of a story. Write the next paragraph of the story in vivid, concrete prose. "
        f"{voice(story)} Tell only the given actions, in the given order, continuing directly from the recent "
        "paragraphs. Do not summarise, do not add headings, do not address the reader. Write one paragraph "
        "only."
    )


def narration_system(story: StoryDefinition, *, vets: bool) -> str:
    """The narrator's instructions when one call selects, orders and writes (``narrator_calls = 1``)."""
    vetting = (
        " List the ids of any proposed world updates that conflict with the state or with each other and must "
        "not be applied."
        if vets
        else ""
    )
    return (
        "You are the narrator of a story. Several characters have each proposed an action, with the changes it "
        "would make to the world state and whether it would complete the current goal. First choose the actions "
        "that fit the current scene best and do not contradict each other, and put them in the order in which "
        f"they happen.{vetting} Then write the next paragraph of the story in vivid, concrete prose, telling the "
        f"chosen actions in that order and continuing directly from the recent paragraphs. {voice(story)} Do not "
        "summarise, do not add headings, do not address the reader. Write one paragraph only."
    )


def goal_transition_system(story: StoryDefinition) -> str:
    """The goal generator's instructions when its reply also carries the transition (``goal_calls = 1``)."""
    return (
        f"{GOAL_SYSTEM} Then write a short transition paragraph: story prose, not a summary and without "
        f"headings, that carries the story from its last paragraph toward the new goal. {voice(story)}"
    )


def transition_system(story: StoryDefinition) -> str:
    return (
        "You are the narrator of a story. Write a short transition paragraph in story prose (no summary, no "
        f"headings) that carries the story from its last paragraph toward the new goal. {voice(story)}"
    )


def baseline_system(story: StoryDefinition) -> str:
    return (
        "You are a novelist. Write the story described below, one paragraph at a time, in vivid, concrete "
        f"prose. {voice(story)} Continue directly from the story so far. Write one paragraph only, no "
        "headings."
    )


def story_block(story: StoryDefinition) -> str:
    lines = [f"Title: {story.title}", f"Genre: {story.genre}", f"High-level story goal: {story.goal}"]
    if story.premise:
        lines.append(f"Premise: {story.premise}")
    return "\n".join(lines)


def persona(char: Character, world: WorldGraph | None) -> str:
    """A persona with location and relationships from the world graph at this step."""
    if world is None:
        return char.persona()
    return char.persona(location=world.location(char.name), relationships=world.relationships(char.name))


def personas_block(story: StoryDefinition, world: WorldGraph | None = None) -> str:
    return "Characters:\n\n" + "\n\n".join(persona(c, world) for c in story.characters)


def recent_block(recent: Sequence[str]) -> str:
    if not recent:
        return "Story so far: (the story has not started yet)"
    return "Recent story paragraphs:\n\n" + "\n\n".join(recent)


def memory_blocks(memory: Memory) -> tuple[str, str]:
    """``(recap, recalled)`` prompt blocks ("" when empty)."""
    recap = f"The story so far, in brief:\n{memory.recap}" if memory.recap else ""
    recalled = ("Earlier passages that may matter now:\n\n" + "\n\n".join(memory.recalled)) if memory.recalled else ""
    return recap, recalled


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def state_block(entries: Sequence[Entry] | None, viewer: str | None = None, *, title: str = "World state") -> str:
    """The world state grouped by subject; secrets marked (``viewer``: whose own they are)."""
    if entries is None:
        return ""
    if not entries:
        return f"{title}: (empty)"
    lines = [f"{title} (subject: attribute = value):"]
    subject = None
    for e in entries:
        if e.subject != subject:
            subject = e.subject
            lines.append(f"{subject}:" if subject != WORLD else "world:")
        mark = ""
        if e.secret:
            mark = "  (your secret)" if viewer is not None and e.subject == viewer else "  (secret)"
        lines.append(f"  {e.attribute} = {_value(e.value)}{mark}")
    return "\n".join(lines)


def _entries(world: WorldGraph | None, viewer: str | None = None) -> list[Entry] | None:
    return world.entries(viewer) if world is not None else None


def _join(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p)


def scene(
    story: StoryDefinition,
    goal: str,
    recent: Sequence[str],
    world: WorldGraph | None,
    memory: Memory = NO_MEMORY,
    *,
    paper_inputs: bool = False,
) -> str:
    """The story as the critic, the selection and the narrator see it at one step (every secret
    marked): their shared system message, the same bytes for each. ``paper_inputs`` (the narrator's
    under ``role_inputs = "paper"``): without the personas, which §3.2 does not give the narrator."""
    recap, recalled = memory_blocks(memory)
    return _join(
        story_block(story),
        recap,
        "" if paper_inputs else personas_block(story, world),
        recalled,
        recent_block(recent),
        state_block(_entries(world)),
        f"Current story goal: {goal}",
    )


def _in_scene(context: str, instructions: str, *parts: str) -> list[Message]:
    """The story first (the system message), then the role's instructions and task (the user turn)."""
    return [{"role": "system", "content": context}, {"role": "user", "content": _join(instructions, *parts)}]


def character(
    story: StoryDefinition,
    char: Character,
    goal: str,
    recent: Sequence[str],
    world: WorldGraph | None,
    ending: str,
    *,
    with_effects: bool,
    memory: Memory = NO_MEMORY,
) -> list[Message]:
    task = f"Your character is {char.name}. What does {char.name} do next?"
    if with_effects:
        task += " Also say whether the action completes the current goal" + (
            ", and list the changes it makes to the world state (subject, attribute, value; at most four)."
            if world is not None
            else "."
        )
    recap, recalled = memory_blocks(memory)
    seen = _entries(world, char.name)
    secrets = [e for e in seen if e.secret] if seen else []
    user = _join(  # the story and the public state before the persona: the characters' requests share them
        story_block(story),
        recap,
        recalled,
        recent_block(recent),
        state_block(None if seen is None else [e for e in seen if not e.secret]),
        f"Your character:\n{persona(char, world)}",
        state_block(secrets, char.name, title="Your secrets") if secrets else "",
        f"Current story goal: {goal}",
        ending,
        task,
    )
    if world is not None:  # the goal, recap and story text come from roles that see every secret
        user = world.redact(user, char.name)
    return [{"role": "system", "content": CHARACTER_SYSTEM}, {"role": "user", "content": user}]


def revision(messages: list[Message], action: str, feedback: str) -> list[Message]:
    """The agent's earlier attempt and the critic's feedback, appended (the prefix is kept)."""
    return [
        *messages,
        {"role": "assistant", "content": json.dumps({"action": action}, ensure_ascii=False)},
        {"role": "user", "content": f"The critic asks for a revision: {feedback}\nPropose a better action."},
    ]


def critic(
    story: StoryDefinition,
    char: Character,
    action: str,
    goal: str,
    recent: Sequence[str],
    world: WorldGraph | None,
    *,
    final: bool,
    memory: Memory = NO_MEMORY,
    example: bool = False,
    paper_inputs: bool = False,
) -> list[Message]:
    """``paper_inputs`` (``role_inputs = "paper"``): the critic sees what §3.2 gives it, the action, the
    character's persona, the current goal and the world state: no story paragraphs, recalled passages or
    recap, and no other persona (``recent`` and ``memory`` are unused)."""
    system = CRITIC_SYSTEM if world is not None else CRITIC_STATELESS_SYSTEM
    if example:
        system += CRITIC_EXAMPLE if world is not None else CRITIC_STATELESS_EXAMPLE
    task = f"Proposed action of {char.name}: {action}\n\n" + (
        "This action is final (the revision maximum is reached). State its effects." if final else "Judge it."
    )
    if paper_inputs:
        context = _join(story_block(story), state_block(_entries(world)), f"Current story goal: {goal}")
        return _in_scene(context, system, f"The character:\n{persona(char, world)}", task)
    return _in_scene(scene(story, goal, recent, world, memory), system, task)


@dataclass(frozen=True)
class Candidate:
    """One action as the narrator weighs it: text, proposed updates (with ids), goal flag."""

    character: str
    action: str
    updates: list[tuple[str, str, str, Any]]  # (id, subject, attribute, value)
    goal_reached: bool


def _offer_blocks(candidates: Sequence[Candidate], world: WorldGraph | None, ending: str) -> list[str]:
    """What the narrator sees between its instructions and its task: the ending, the proposed actions."""
    listed = []
    for c in candidates:
        listed.append(f"- {c.character}: {c.action}")
        if world is not None:
            listed.append(
                "  world updates: "
                + ("; ".join(f"[{uid}] {s}.{a} = {_value(v)}" for uid, s, a, v in c.updates) or "none")
            )
        listed.append(f"  completes the current goal: {'yes' if c.goal_reached else 'no'}")
    return [ending, "Proposed actions:\n" + "\n".join(listed)]


def _selection_task(vets: bool) -> str:
    return "Which actions happen next, and in what order?" + (
        " Which world updates, if any, must be rejected?" if vets else ""
    )


def selection(
    story: StoryDefinition,
    candidates: Sequence[Candidate],
    goal: str,
    recent: Sequence[str],
    world: WorldGraph | None,
    ending: str,
    memory: Memory = NO_MEMORY,
    *,
    vets: bool = True,
    paper_inputs: bool = False,
) -> list[Message]:
    """``vets``: also ask which world updates to reject (fabula's addition; the paper's narrator selects
    and orders the actions only)."""
    return _in_scene(
        scene(story, goal, recent, world, memory, paper_inputs=paper_inputs),
        SELECT_SYSTEM if vets else SELECT_ONLY_SYSTEM,
        *_offer_blocks(candidates, world, ending),
        _selection_task(vets),
    )


def narration(
    story: StoryDefinition,
    candidates: Sequence[Candidate],
    goal: str,
    recent: Sequence[str],
    world: WorldGraph | None,
    ending: str,
    memory: Memory = NO_MEMORY,
    *,
    vets: bool = False,
    paper_inputs: bool = False,
) -> list[Message]:
    """The narrator's one call (``narrator_calls = 1``): what :func:`selection` shows, then the task of
    choosing, ordering and writing the paragraph in the same reply."""
    return _in_scene(
        scene(story, goal, recent, world, memory, paper_inputs=paper_inputs),
        narration_system(story, vets=vets),
        *_offer_blocks(candidates, world, ending),
        _selection_task(vets) + " Then write the next paragraph, telling those actions in that order.",
    )


def paragraph(
    story: StoryDefinition,
    ordered: Sequence[tuple[str, str]],
    goal: str,
    recent: Sequence[str],
    world: WorldGraph | None,
    ending: str,
    memory: Memory = NO_MEMORY,
    *,
    paper_inputs: bool = False,
) -> list[Message]:
    listed = "\n".join(f"{i}. {name}: {text}" for i, (name, text) in enumerate(ordered, 1))
    return _in_scene(
        scene(story, goal, recent, world, memory, paper_inputs=paper_inputs),
        narrator_system(story),
        ending,
        f"Actions to tell, in this order:\n{listed}",
        "Write the next paragraph.",
    )


def plan_block(story: StoryDefinition, beat: str | None, status: str) -> str:
    """The writer's plan as the goal generator must follow it: the next beat, the ending."""
    lines = []
    if beat:
        lines.append(f"The next planned plot point, which the new goal must lead to: {beat}")
    if story.ending and status == "conclude":
        lines.append(f"The intended ending: {story.ending}")
    elif story.ending:
        lines.append(f"The story is headed for this ending (do not reach it yet): {story.ending}")
    return "\n".join(lines)


def story_context(
    story: StoryDefinition, world: WorldGraph | None, recent: Sequence[str], memory: Memory = NO_MEMORY
) -> str:
    """The story as the goal generator and the transition see it after a step: their system
    message, so the transition reuses the goal call's cache up to the world state, which only the
    goal generator is shown (and both share the story block and personas with the step's scene)."""
    recap, _ = memory_blocks(memory)
    return _join(story_block(story), recap, personas_block(story, world), recent_block(recent))


def goal(
    story: StoryDefinition,
    previous: str,
    prior_goals: Sequence[str],
    recent: Sequence[str],
    world: WorldGraph | None,
    status: str,
    *,
    beat: str | None = None,
    memory: Memory = NO_MEMORY,
    transition: bool = False,
) -> list[Message]:
    """``transition``: the reply also carries the transition paragraph (``goal_calls = 1``)."""
    history = "Earlier goals (do not repeat them):\n" + "\n".join(f"- {g}" for g in prior_goals)
    context = _join(story_context(story, world, recent, memory), state_block(_entries(world)))
    task = [history, f"Previous goal: {previous}", plan_block(story, beat, status), GOAL_STATUS_TEXT[status]]
    if not transition:
        return _in_scene(context, GOAL_SYSTEM, *task)
    task[-1] += "\n\nThen write the transition paragraph" + (
        " that opens the story's final movement." if status == "conclude" else "."
    )
    return _in_scene(context, goal_transition_system(story), *task)


def transition(
    story: StoryDefinition,
    recent: Sequence[str],
    new_goal: str,
    status: str,
    world: WorldGraph | None = None,
    memory: Memory = NO_MEMORY,
) -> list[Message]:
    return _in_scene(
        story_context(story, world, recent, memory),
        transition_system(story),
        f"New goal: {new_goal}",
        "Write the transition paragraph" + (" that opens the story's final movement." if status == "conclude" else "."),
    )


def recap(story: StoryDefinition, previous: str, paragraphs: Sequence[str]) -> list[Message]:
    user = _join(
        story_block(story),
        f"Recap so far:\n{previous or '(none yet)'}",
        "New paragraphs:\n\n" + "\n\n".join(paragraphs),
        "Write the updated recap.",
    )
    return [{"role": "system", "content": RECAP_SYSTEM}, {"role": "user", "content": user}]


def baseline(story: StoryDefinition, recent: Sequence[str], words: int, ending: str) -> list[Message]:
    user = _join(
        story_block(story),
        personas_block(story),
        recent_block(recent),
        f"The story will be about {story.target_words} words long; {words} are written.",
        ending,
        "Write the next paragraph.",
    )
    return [{"role": "system", "content": baseline_system(story)}, {"role": "user", "content": user}]
