"""The model-written line of a style card, under constrained decoding (``grammars.style.StyleDescription``).

Asked once per run, before the first chapter, from the measured card and a few passages of the sample;
the answer is stored in the run's ``style`` plan entry, so a resume does not ask again.
"""

from __future__ import annotations

from typing import Any

from grammars.style import StyleDescription

DESCRIPTION_TOKENS = 300
"""Room for the description (three or four sentences)."""


def description_messages(guide: dict[str, Any]) -> list[dict[str, str]]:
    """The request: the measured card and the first passages of the sample."""
    passages = "\n\n".join(guide["passages"][:3])
    return [
        {"role": "system", "content": "You are an editor who describes a writer's prose style precisely."},
        {
            "role": "user",
            "content": f"Measured features of the writer's sample:\n{guide['card']}\n\n"
            f"Passages of the sample:\n{passages}\n\nDescribe this writer's voice in "
            "three or four sentences a novelist could follow: diction, rhythm, "
            "imagery, narrative distance, how dialogue is handled. Describe the style "
            "only, not the events. Reply as JSON with one field, description.",
        },
    ]


def describe(llm: Any, budget: Any, guide: dict[str, Any], *, temperature: float) -> str:
    """The model's description of the sample's voice (``budget``: the run's ``agent.llm.budget.Budget``)."""
    reply = budget.generate(
        llm,
        description_messages(guide),
        StyleDescription,
        temperature=temperature,
        max_tokens=DESCRIPTION_TOKENS,
        min_output=128,
        what="the style description",
        role="style_description",
    )
    parsed = (
        reply.parsed
        if isinstance(getattr(reply, "parsed", None), StyleDescription)
        else StyleDescription.model_validate_json(reply.text)
    )
    return " ".join(parsed.description.split())
