"""A first demo grammar: a character sheet with a nested list, an enum, a bool and an optional field.

It exists to exercise every JSON Schema construct the pipelines will rely on, on every
backend, before the pipelines add their own grammars.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from grammars.base import Grammar
from grammars.registry import register


class Temperament(StrEnum):
    calm = "calm"
    fiery = "fiery"
    sly = "sly"
    gloomy = "gloomy"


class Possession(Grammar):
    item: str = Field(min_length=1, description="a thing the character carries")
    treasured: bool


@register("character_sheet")
class CharacterSheet(Grammar):
    """A small persona card: the shape of Magnet's character profiles, in miniature."""

    name: str = Field(pattern=r"^[A-Z][a-z]+( [A-Z][a-z]+)?$", description="given name, optional surname")
    temperament: Temperament
    is_villain: bool
    possessions: list[Possession] = Field(min_length=1, max_length=3)
    secret: str | None = None
