"""The model-written part of a style card: a short description of a writer's voice."""

from grammars.base import Grammar
from grammars.registry import register


@register("style_description")
class StyleDescription(Grammar):
    """How the sample's prose sounds, in a few sentences a novelist can follow (diction, rhythm, imagery,
    narrative distance); bounded by the request's ``max_tokens``."""

    description: str
