"""The three-character test story, parsed (its data is ``agent.testing.story_llm.story_dict``)."""

from __future__ import annotations

from typing import Any

from agent.magnet.definition import StoryDefinition, parse_definition
from agent.testing.story_llm import story_dict


def story(**over: Any) -> StoryDefinition:
    return parse_definition(story_dict(**over), "test.toml")
