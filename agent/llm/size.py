"""How big a model is, from what its backend says: the parameter count where it is known
(the embedded model, llama-server's ``meta.n_params``), else a size in its name
(``Qwen3-0.6B``, ``SmolLM2-135M``), else nothing.

``--profile auto`` (the CLI) gives a model at or under :data:`TINY_PARAMETERS` the small
profile: the aids measured to keep 135M-4B models writing (README, "Small models").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.llm.base import LLM

TINY_PARAMETERS = 4_500_000_000
"""The small profile's range ends at 4B parameters (rounded up: a "4B" model is 4.0-4.4B)."""
_NAMED_SIZE = re.compile(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)\s*([bm])(?![a-z])", re.IGNORECASE)
_MIXTURE = re.compile(r"\d+x\d+(?:\.\d+)?b|-a\d+(?:\.\d+)?b", re.IGNORECASE)


@dataclass(frozen=True)
class ModelSize:
    """A model's parameters (``None``: unknown) and how that was learnt, for the one line printed."""

    parameters: int | None
    source: str

    @property
    def tiny(self) -> bool:
        return self.parameters is not None and self.parameters <= TINY_PARAMETERS

    def describe(self) -> str:
        if self.parameters is None:
            return "size unknown"
        return f"{human(self.parameters)} parameters ({self.source})"


def model_size(llm: LLM) -> ModelSize:
    counted = llm.parameter_count
    if counted:
        return ModelSize(int(counted), f"reported by the {llm.backend} backend")
    named = size_in_name(llm.model or "")
    if named is not None:
        return ModelSize(named, f"from its name {llm.model}")
    return ModelSize(None, "not reported")


def size_in_name(name: str) -> int | None:
    """``Qwen3-0.6B`` -> 600M, ``SmolLM2-135M-Instruct`` -> 135M; ``None`` for a mixture of experts
    (``8x7B``, ``30B-A3B``: active and total sizes differ) or a name without a size."""
    leaf = name.rsplit("/", 1)[-1]
    if _MIXTURE.search(leaf):
        return None
    found = _NAMED_SIZE.findall(leaf)
    if len(found) != 1:
        return None
    number, unit = found[0]
    return int(float(number) * (1e9 if unit.lower() == "b" else 1e6))


def human(parameters: int) -> str:
    if parameters >= 1e9:
        return f"{parameters / 1e9:.1f}B".replace(".0B", "B")
    return f"{parameters / 1e6:.0f}M"
