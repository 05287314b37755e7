"""``--profile auto``: the profile follows the model. A model known to be tiny (the embedded
default; a server that reports a small parameter count, or a size in the model's name) gets
the small profile, said in one line and recorded in the run; any other gets the default.
``--profile default|small|paper`` (or ``profile`` in the config file) decides instead; ``paper`` is
the papers' and their reference code's settings (docs/profiles.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.cli import config_file
from agent.llm.size import model_size

if TYPE_CHECKING:
    from agent.llm import LLM

PROFILE_CHOICES = ("auto", "default", "small", "paper")
PROFILE_HELP = (
    "auto (the default): the small profile for a model of at most 4B parameters (the embedded one, or "
    "a server's that reports its size), else default; small: the aids that keep 135M-4B models writing "
    "(sampling penalties, trimming of cut drafts, ...), each still a setting of its own; default: "
    "fabula's aids for any model (docs/profiles.md lists how it departs from the papers); paper: "
    "NstAgent, its baselines and Magnet as their papers and the NstAgent reference code describe them "
    "(config file: profile)"
)


@dataclass(frozen=True)
class ProfileChoice:
    name: str
    asked: str
    reason: str | None = None
    """Why ``auto`` chose it (the one line printed and recorded); None when asked by name."""

    def record(self) -> dict[str, str | None]:
        return {"asked": self.asked, "chosen": self.name, "reason": self.reason}


def asked_profile(flag: str | None) -> str:
    """The flag, else the config file's ``profile``, else ``auto``."""
    return flag or config_file.load().profile or "auto"


def choose_profile(flag: str | None, llm: LLM) -> ProfileChoice:
    asked = asked_profile(flag)
    if asked != "auto":
        return ProfileChoice(asked, asked)
    size = model_size(llm)
    if size.tiny:
        return ProfileChoice(
            "small",
            asked,
            f"profile small for the tiny model {llm.model} ({size.describe()}); "
            "--profile default writes without its aids",
        )
    return ProfileChoice("default", asked, f"profile default for {llm.model} ({size.describe()})")
