"""Magnet's structured replies: action, critic verdict, narrator selection, next goal.

The registered models are the general shapes (exported as JSON Schemas). At run time the
pipeline narrows some of them to the story at hand (character names become an enum, the
critic's last word on a capped action offers no "revise"), so the grammar itself carries
the rules a small model would otherwise break. Prose (paragraphs, transitions) is not JSON:
it is generated as plain text.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from grammars.base import Grammar
from grammars.registry import register

KEY_PATTERN = r"^[a-z][a-z0-9_]*$"
"""World-variable attributes: snake_case, so the state reads like the paper's examples."""


class WorldUpdate(Grammar):
    """One world-state write: ``subject``'s ``attribute`` = ``value``.

    At run time ``subject`` becomes the enum of this story's names (``world`` or a character)
    and ``attribute``, per subject, the enum of its existing attributes or a new snake_case one,
    so an overwrite names the very variable it overwrites."""

    subject: str = Field(min_length=1, description="'world' or the character this variable belongs to")
    attribute: str = Field(
        pattern=KEY_PATTERN,
        description="an existing attribute of the subject, or a new snake_case one, e.g. holding_back_evidence",
    )
    value: str = Field(description="new value: true, false, a number or a short phrase")


@register("magnet_action")
class CharacterAction(Grammar):
    """What one character intends to do next, in one or two concrete sentences."""

    action: str = Field(min_length=1, description="a concrete, specific action in the scene, third person")


@register("magnet_action_with_updates")
class CharacterActionWithUpdates(Grammar):
    """Without a critic (``--no-critic``) the character states its action's effects itself."""

    action: str = Field(min_length=1)
    world_updates: list[WorldUpdate] = Field(max_length=4)
    goal_reached: bool


@register("magnet_critic_review")
class CriticReview(Grammar):
    """The critic's verdict on an action while revisions remain.

    ``world_updates`` and ``goal_reached`` are used only when the verdict is ``accept``.
    """

    verdict: Literal["accept", "revise"]
    feedback: str = Field(description="what to change (revise) or why it works (accept), one sentence")
    world_updates: list[WorldUpdate] = Field(max_length=4)
    goal_reached: bool


@register("magnet_critic_final")
class CriticFinal(Grammar):
    """The critic's word on an action that reached the revision maximum: effects only."""

    world_updates: list[WorldUpdate] = Field(max_length=4)
    goal_reached: bool


@register("magnet_critic_review_stateless")
class CriticReviewStateless(Grammar):
    """``--no-structured-state``: the critic still judges and spots goal completion, no updates."""

    verdict: Literal["accept", "revise"]
    feedback: str
    goal_reached: bool


@register("magnet_narrator_selection")
class NarratorSelection(Grammar):
    """The characters whose actions fit the scene, in the order they happen."""

    selected: list[str] = Field(min_length=1, description="character names, in story order, no repeats")
    rejected_updates: list[str] = Field(
        description="ids of proposed world updates that conflict and must not "
        "be committed (at run time: an enum of this step's ids)"
    )


@register("magnet_goal")
class NextGoal(Grammar):
    """The next story goal: one concrete objective the characters can reach in a few scenes."""

    goal: str = Field(min_length=1)


@register("magnet_action_goal")
class CharacterActionGoal(Grammar):
    """``--no-critic --no-structured-state``: the action and whether it completes the goal."""

    action: str = Field(min_length=1)
    goal_reached: bool


@register("magnet_critic_final_stateless")
class CriticFinalStateless(Grammar):
    """``--no-structured-state``, revision maximum reached: only whether the goal is complete."""

    goal_reached: bool


@register("magnet_narrator_turn")
class NarratorTurn(Grammar):
    """The narrator's whole turn in one reply: the characters whose actions fit the scene, in the
    order they happen, then the paragraph that tells those actions in that order."""

    selected: list[str] = Field(min_length=1, description="character names, in story order, no repeats")
    paragraph: str = Field(
        min_length=1, description="the next paragraph of the story, telling the selected actions in that order"
    )


@register("magnet_narrator_turn_vetting")
class NarratorTurnVetting(Grammar):
    """The narrator's whole turn in one reply, also rejecting conflicting world updates."""

    selected: list[str] = Field(min_length=1, description="character names, in story order, no repeats")
    rejected_updates: list[str] = Field(
        description="ids of proposed world updates that conflict and must not be committed"
    )
    paragraph: str = Field(
        min_length=1, description="the next paragraph of the story, telling the selected actions in that order"
    )


@register("magnet_goal_transition")
class NextGoalTransition(Grammar):
    """The next story goal, and the transition paragraph that carries the story toward it."""

    goal: str = Field(min_length=1, description="one concrete objective the characters can reach in a few scenes")
    transition: str = Field(
        min_length=1, description="story prose that leads from the last paragraph toward the new goal"
    )
