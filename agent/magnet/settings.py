"""Every knob of a Magnet run, with the paper's defaults; all of it is stored in the run.

Temperatures are Appendix A.1's; the 15/40 thresholds and the revision maximum are
Section 3's. What the paper leaves open (history window, token budgets, ending window)
has a default chosen for small local models, and is recorded like the rest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class MagnetSettings:
    character_temperature: float = 0.2
    critic_temperature: float = 0.1
    narrator_temperature: float = 0.35
    goal_temperature: float = 0.1
    baseline_temperature: float = 0.35
    max_revisions: int = 3
    stall_steps: int = 15
    shift_every: int = 40
    history_window: int = 3
    """Recent story paragraphs every role sees."""
    action_tokens: int = 160
    critic_tokens: int = 400
    selection_tokens: int = 80
    paragraph_tokens: int = 320
    paragraph_min_tokens: int = 60
    goal_tokens: int = 120
    transition_tokens: int = 220
    ending_paragraphs: int = 4
    """Steer to a concluding goal when this many paragraphs' worth of words remain."""
    max_steps_factor: float = 3.0
    """Hard bound on timesteps: factor x (target words / paragraph_min_tokens); hit is recorded."""
    retries: int = 1
    """Re-asks of one failed model call (a truncated or invalid reply) before giving up on it."""
    critic: bool = True
    goal_shift: bool = True
    structured_state: bool = True

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> MagnetSettings:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in config.items() if k in known})

    def as_config(self) -> dict[str, Any]:
        return asdict(self)

    def ablations(self) -> list[str]:
        return [name for name, on in (("no-critic", self.critic), ("no-goal-shift", self.goal_shift),
                                      ("no-structured-state", self.structured_state)) if not on]
