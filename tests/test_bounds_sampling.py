"""Numeric ranges hold while decoding on the real backends: 20+ samples at temperature 1.0,
none refused by the check after decoding (before the rewrite, 2 of 3 were refused)."""

from __future__ import annotations

import pytest

from agent.llm import JsonSchema, LLMError, Request

SAMPLES = 20
ASK = [
    {
        "role": "user",
        "content": "Rate this story from 1 to 10, give a percentage of how finished it is, "
        "and name the chapter where it peaks. Story: A keeper finds a letter from the future.",
    }
]
RANGES = JsonSchema(
    {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "minimum": 1, "maximum": 10},
            "percent": {"type": "integer", "minimum": 0, "maximum": 100},
            "peak_chapter": {"type": "integer", "minimum": 1, "maximum": 40},
        },
        "required": ["score", "percent", "peak_chapter"],
        "additionalProperties": False,
    },
    name="ranges",
)
ONE_SIDED = JsonSchema(
    {
        "type": "object",
        "properties": {
            "chapter": {"type": "integer", "minimum": 1},
            "weight": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["chapter", "weight"],
        "additionalProperties": False,
    },
    name="one_sided",
)


def _refused(results: list) -> list[str]:
    return [str(r) for r in results if isinstance(r, LLMError)]


@pytest.mark.embedded
def test_embedded_ranges_hold_on_every_sample(embedded_llm):
    for schema, n in ((RANGES, SAMPLES), (ONE_SIDED, 10)):
        results = embedded_llm.generate_many(
            [Request(ASK, schema, temperature=1.0, max_tokens=60, seed=s) for s in range(n)], return_exceptions=True
        )
        assert _refused(results) == []
        for r in results:
            values = r.parsed
            if schema is RANGES:
                assert 1 <= values["score"] <= 10 and 0 <= values["percent"] <= 100
            else:
                assert values["chapter"] >= 1 and 0 <= values["weight"] <= 1


@pytest.mark.server
def test_server_ranges_hold_on_every_sample(endpoint_llm):
    for schema, n in ((RANGES, SAMPLES), (ONE_SIDED, SAMPLES)):
        results = endpoint_llm.generate_many(
            [Request(ASK, schema, temperature=1.0, max_tokens=60, seed=s) for s in range(n)], return_exceptions=True
        )
        assert _refused(results) == []
        assert len({r.text for r in results}) > 1  # really sampled
