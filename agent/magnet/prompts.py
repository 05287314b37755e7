"""Every Magnet prompt, ordered for the prefix cache.

Order inside each prompt: what never changes (the role's instructions, the story premise,
the personas), then what only grows or drifts slowly (recent paragraphs, the world state),
then what changes every call (the goal, the action under review, the task). No counter,
timestamp or step number appears before the task.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agent.llm.types import Message
from agent.magnet.definition import Character, StoryDefinition

CHARACTER_SYSTEM = (
    "You play one character in a story written by several agents. Propose what your character does next: "
    "one concrete, specific action in one or two sentences, in the third person, that fits the character's "
    "personality, abilities and current location, and that moves the current story goal forward. Do not narrate "
    "other characters' actions. Do not repeat an action already told in the story."
)
CRITIC_SYSTEM = (
    "You are the critic of a multi-agent story. Judge a character's proposed action: is it relevant to the "
    "current goal, specific, consistent with the character and the scene, plausible and new? Ask for a revision "
    "(verdict revise, with one sentence of feedback) if it is vague, out of character, implausible, repetitive or "
    "does not advance the goal; otherwise accept it. For an accepted action, list the changes it makes to the "
    "world state as snake_case variables (for example holding_back_evidence = false), at most four, each "
    "concerning one character or the world, and say whether it completes the current goal."
)
CRITIC_STATELESS_SYSTEM = (
    "You are the critic of a multi-agent story. Judge a character's proposed action: is it relevant to the "
    "current goal, specific, consistent with the character and the scene, plausible and new? Ask for a revision "
    "(verdict revise, with one sentence of feedback) if it is vague, out of character, implausible, repetitive or "
    "does not advance the goal; otherwise accept it, and say whether it completes the current goal."
)
SELECT_SYSTEM = (
    "You are the narrator of a story. Several characters have each proposed an action. Choose the actions that "
    "fit the current scene best and do not contradict each other, and put them in the order in which they "
    "happen. Answer with the characters' names."
)
NARRATOR_SYSTEM = (
    "You are the narrator of a story. Write the next paragraph of the story in vivid, concrete prose, past "
    "tense, third person. Tell only the given actions, in the given order, continuing directly from the recent "
    "paragraphs. Do not summarise, do not add headings, do not address the reader. Write one paragraph only."
)
GOAL_SYSTEM = (
    "You plan the next story goal of a multi-agent story. Give one concrete objective that the characters can "
    "reach within a few scenes, that follows from what has happened, that is not a repeat of any earlier goal, "
    "and that lets the story develop further. One sentence."
)
TRANSITION_SYSTEM = (
    "You are the narrator of a story. Write a short transition paragraph in story prose (past tense, third "
    "person, no summary, no headings) that carries the story from its last paragraph toward the new goal."
)
BASELINE_SYSTEM = (
    "You are a novelist. Write the story described below, one paragraph at a time, in vivid, concrete prose, "
    "past tense, third person. Continue directly from the story so far. Write one paragraph only, no headings."
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


def story_block(story: StoryDefinition) -> str:
    lines = [f"Title: {story.title}", f"Genre: {story.genre}", f"High-level story goal: {story.goal}"]
    if story.premise:
        lines.append(f"Premise: {story.premise}")
    return "\n".join(lines)


def personas_block(story: StoryDefinition) -> str:
    return "Characters:\n\n" + "\n\n".join(c.persona() for c in story.characters)


def recent_block(recent: Sequence[str]) -> str:
    if not recent:
        return "Story so far: (the story has not started yet)"
    return "Recent story paragraphs:\n\n" + "\n\n".join(recent)


def state_block(state: Mapping[str, Any] | None) -> str:
    if state is None:
        return ""
    if not state:
        return "World state: (empty)"
    return "World state:\n" + "\n".join(f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in state.items())


def _join(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p)


def character(story: StoryDefinition, char: Character, goal: str, recent: Sequence[str],
              view: Mapping[str, Any] | None, ending: str, *, with_effects: bool, with_state: bool) -> list[Message]:
    task = f"Your character is {char.name}. What does {char.name} do next?"
    if with_effects:
        task += (" Also say whether the action completes the current goal"
                 + (", and list the changes it makes to the world state (snake_case variables, at most four)."
                    if with_state else "."))
    user = _join(story_block(story), f"Your character:\n{char.persona()}", recent_block(recent),
                 state_block(view), f"Current story goal: {goal}", ending, task)
    return [{"role": "system", "content": CHARACTER_SYSTEM}, {"role": "user", "content": user}]


def revision(messages: list[Message], action: str, feedback: str) -> list[Message]:
    """The agent's earlier attempt and the critic's feedback, appended (the prefix is kept)."""
    return [*messages, {"role": "assistant", "content": json.dumps({"action": action}, ensure_ascii=False)},
            {"role": "user", "content": f"The critic asks for a revision: {feedback}\nPropose a better action."}]


def critic(story: StoryDefinition, char: Character, action: str, goal: str, recent: Sequence[str],
           state: Mapping[str, Any] | None, *, final: bool) -> list[Message]:
    system = CRITIC_SYSTEM if state is not None else CRITIC_STATELESS_SYSTEM
    task = (f"Proposed action of {char.name}: {action}\n\n"
            + ("This action is final (the revision maximum is reached). State its effects."
               if final else "Judge it."))
    user = _join(story_block(story), personas_block(story), recent_block(recent), state_block(state),
                 f"Current story goal: {goal}", task)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def selection(story: StoryDefinition, actions: Mapping[str, str], goal: str, recent: Sequence[str],
              state: Mapping[str, Any] | None, ending: str) -> list[Message]:
    listed = "\n".join(f"- {name}: {text}" for name, text in actions.items())
    user = _join(story_block(story), personas_block(story), recent_block(recent), state_block(state),
                 f"Current story goal: {goal}", ending, f"Proposed actions:\n{listed}",
                 "Which actions happen next, and in what order?")
    return [{"role": "system", "content": SELECT_SYSTEM}, {"role": "user", "content": user}]


def paragraph(story: StoryDefinition, ordered: Sequence[tuple[str, str]], goal: str, recent: Sequence[str],
              state: Mapping[str, Any] | None, ending: str) -> list[Message]:
    listed = "\n".join(f"{i}. {name}: {text}" for i, (name, text) in enumerate(ordered, 1))
    user = _join(story_block(story), personas_block(story), recent_block(recent), state_block(state),
                 f"Current story goal: {goal}", ending, f"Actions to tell, in this order:\n{listed}",
                 "Write the next paragraph.")
    return [{"role": "system", "content": NARRATOR_SYSTEM}, {"role": "user", "content": user}]


def goal(story: StoryDefinition, previous: str, prior_goals: Sequence[str], recent: Sequence[str],
         state: Mapping[str, Any] | None, status: str) -> list[Message]:
    history = "Earlier goals (do not repeat them):\n" + "\n".join(f"- {g}" for g in prior_goals)
    user = _join(story_block(story), personas_block(story), recent_block(recent), state_block(state), history,
                 f"Previous goal: {previous}", GOAL_STATUS_TEXT[status])
    return [{"role": "system", "content": GOAL_SYSTEM}, {"role": "user", "content": user}]


def transition(story: StoryDefinition, recent: Sequence[str], new_goal: str, status: str) -> list[Message]:
    user = _join(story_block(story), personas_block(story), recent_block(recent),
                 f"New goal: {new_goal}",
                 "Write the transition paragraph" + (" that opens the story's final movement." if status == "conclude"
                                                     else "."))
    return [{"role": "system", "content": TRANSITION_SYSTEM}, {"role": "user", "content": user}]


def baseline(story: StoryDefinition, recent: Sequence[str], words: int, ending: str) -> list[Message]:
    user = _join(story_block(story), personas_block(story), recent_block(recent),
                 f"The story will be about {story.target_words} words long; {words} are written.", ending,
                 "Write the next paragraph.")
    return [{"role": "system", "content": BASELINE_SYSTEM}, {"role": "user", "content": user}]
