"""The grammar offered on each call, narrowed to this story and this moment.

"Let the grammar carry the rules": a world update names its subject from the closed set of
this story's names (``world`` or a character) and an attribute that is one of that subject's
existing ones or a new snake_case name (the world's ``resolve`` then maps any spelling of an
existing variable onto it); the narrator can only select characters that acted this timestep
(and reject only update ids offered this timestep), the critic cannot ask for a revision once
the maximum is reached, and an ablation removes the fields whose duty it removes. The
controller still checks what comes back.
"""

from __future__ import annotations

import re
from functools import lru_cache
from types import GenericAlias
from typing import Annotated, Any, Literal, Union

from pydantic import Field, create_model

from agent.magnet.settings import MagnetSettings
from agent.magnet.world import WORLD, WorldGraph
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
    NarratorTurn,
    NarratorTurnVetting,
    WorldUpdate,
)

MAX_UPDATES = 4

Catalogue = tuple[tuple[str, tuple[str, ...]], ...]
"""Per subject (``world`` first, then each character), the attributes the grammar offers."""


def _choices(names: tuple[str, ...]) -> Any:
    """``Literal[*names]``: a type built at run time (mypy reads it as Any)."""
    return Literal[names]


def _list_of(item: Any) -> Any:
    """``list[item]`` for an item type built at run time (the very alias ``list[...]`` makes; mypy
    reads a subscript as a static type, which a run-time one is not)."""
    return GenericAlias(list, (item,))


def catalogue(world: WorldGraph, viewer: str | None = None) -> Catalogue:
    """What an update may name now: every subject, with the attributes ``viewer`` may see
    (``None``: the critic, who sees all; a character without a critic never sees, and so is
    never offered, another character's secret attributes)."""
    return tuple((s, tuple(world.attributes(s, viewer=viewer))) for s in (WORLD, *world.characters))


def _outside_key_pattern(attributes: tuple[str, ...]) -> tuple[str, ...]:
    """The attributes a new snake_case name could not spell (a world written before the rule)."""
    return tuple(a for a in attributes if not re.match(KEY_PATTERN, a))


@lru_cache(maxsize=256)
def _update(offer: Catalogue) -> Any:
    """One world update's shape. An existing snake_case attribute is already a word of the
    new-attribute pattern, so naming it in an enum adds nothing to the grammar's language (the
    token masks are the same) and only states to its automaton: the subjects whose attributes all
    match share one shape with ``subject`` an enum, and a subject with an attribute outside the
    pattern keeps a shape of its own that offers that name. Why: the museum critic's index
    compiled in 1.7 s with an enum per subject, 0.27 s merged (docs/design/embedded-speed.md)."""
    plain = tuple(subject for subject, attributes in offer if not _outside_key_pattern(attributes))
    models = []
    if plain:
        models.append(create_model("WorldUpdateAny", __base__=WorldUpdate, subject=(_choices(plain), ...)))
    new = Annotated[str, Field(pattern=KEY_PATTERN)]
    for i, (subject, attributes) in enumerate(offer):
        odd = _outside_key_pattern(attributes)
        if not odd:
            continue
        attribute: Any = Union[_choices(odd), new]  # noqa: UP007
        models.append(
            create_model(
                "WorldUpdate" + ("World" if subject == WORLD else f"Character{i}"),
                __base__=WorldUpdate,
                subject=(_choices((subject,)), ...),
                attribute=(
                    attribute,
                    Field(description=f"an existing attribute of {subject}, or a new snake_case one"),
                ),
                value=(str, ...),
            )
        )
    return Union[tuple(models)] if len(models) > 1 else models[0]  # noqa: UP007


@lru_cache(maxsize=256)
def _with_updates(base: type[Grammar], offer: Catalogue) -> type[Grammar]:
    return create_model(
        base.__name__, __base__=base, world_updates=(_list_of(_update(offer)), Field(max_length=MAX_UPDATES))
    )


def action_type(settings: MagnetSettings, offer: Catalogue | None) -> type[Grammar]:
    """The character's reply. Without a critic it also carries the critic's duties."""
    if settings.critic:
        return CharacterAction
    if settings.structured_state and offer is not None:
        return _with_updates(CharacterActionWithUpdates, offer)
    return CharacterActionGoal


def critic_type(settings: MagnetSettings, offer: Catalogue | None, *, final: bool) -> type[Grammar]:
    """The critic's reply: a verdict while revisions remain, only effects at the maximum."""
    if settings.structured_state and offer is not None:
        return _with_updates(CriticFinal if final else CriticReview, offer)
    return CriticFinalStateless if final else CriticReviewStateless


@lru_cache(maxsize=256)
def selection_type(names: tuple[str, ...], update_ids: tuple[str, ...] = ()) -> type[Grammar]:
    """The narrator's selection: names of characters that acted, at most each once, and the
    ids of proposed updates it rejects (only ids offered this step; none when none were)."""
    rejected: Any = (
        (_list_of(_choices(update_ids)), Field(max_length=len(update_ids)))
        if update_ids
        else (_list_of(_choices(("none",))), Field(max_length=0))
    )
    return create_model(
        "NarratorSelection",
        __base__=NarratorSelection,
        selected=(_list_of(_choices(names)), Field(min_length=1, max_length=len(names))),
        rejected_updates=rejected,
    )


@lru_cache(maxsize=256)
def narration_type(names: tuple[str, ...], update_ids: tuple[str, ...] | None = None) -> type[Grammar]:
    """The narrator's one-call reply (``narrator_calls = 1``): the selection as :func:`selection_type`
    narrows it, then the paragraph. ``update_ids``: None when the narrator vets no update."""
    selected = (_list_of(_choices(names)), Field(min_length=1, max_length=len(names)))
    if update_ids is None:
        return create_model("NarratorTurn", __base__=NarratorTurn, selected=selected)
    rejected: Any = (
        (_list_of(_choices(update_ids)), Field(max_length=len(update_ids)))
        if update_ids
        else (_list_of(_choices(("none",))), Field(max_length=0))
    )
    return create_model(
        "NarratorTurnVetting", __base__=NarratorTurnVetting, selected=selected, rejected_updates=rejected
    )
