"""The grammar offered on each call, narrowed to this story and this moment.

"Let the grammar carry the rules": a world update can only concern a character of this
story (or the world), the narrator can only select characters that acted this timestep,
the critic cannot ask for a revision once the maximum is reached, and an ablation removes
the fields whose duty it removes. The controller still checks what comes back.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, create_model

from agent.magnet.settings import MagnetSettings
from agent.magnet.world import WORLD
from grammars.base import Grammar
from grammars.magnet import (
    KEY_PATTERN,
    CharacterAction,
    CharacterActionGoal,
    CharacterActionWithUpdates,
    CriticFinal,
    CriticFinalStateless,
    CriticReview,
    CriticReviewStateless,
    NarratorSelection,
    WorldUpdate,
)

MAX_UPDATES = 4


def _choices(names: tuple[str, ...]):
    return Literal[names]  # type: ignore[valid-type]


@lru_cache(maxsize=64)
def _update(names: tuple[str, ...]) -> type[Grammar]:
    return create_model("WorldUpdate", __base__=WorldUpdate,
                        concerns=(_choices((*names, WORLD)), Field(description="character or 'world'")),
                        key=(str, Field(pattern=KEY_PATTERN)), value=(str, ...))


@lru_cache(maxsize=64)
def _with_updates(base: type[Grammar], names: tuple[str, ...]) -> type[Grammar]:
    return create_model(base.__name__, __base__=base,
                        world_updates=(list[_update(names)], Field(max_length=MAX_UPDATES)))  # type: ignore[valid-type]


def action_type(settings: MagnetSettings, names: tuple[str, ...]) -> type[Grammar]:
    """The character's reply. Without a critic it also carries the critic's duties."""
    if settings.critic:
        return CharacterAction
    if settings.structured_state:
        return _with_updates(CharacterActionWithUpdates, names)
    return CharacterActionGoal


def critic_type(settings: MagnetSettings, names: tuple[str, ...], *, final: bool) -> type[Grammar]:
    """The critic's reply: a verdict while revisions remain, only effects at the maximum."""
    if settings.structured_state:
        return _with_updates(CriticFinal if final else CriticReview, names)
    return CriticFinalStateless if final else CriticReviewStateless


@lru_cache(maxsize=64)
def selection_type(names: tuple[str, ...]) -> type[Grammar]:
    """The narrator's selection: names of characters that acted, at most each once."""
    return create_model("NarratorSelection", __base__=NarratorSelection,
                        selected=(list[_choices(names)], Field(min_length=1, max_length=len(names))))  # type: ignore[valid-type]
