"""How much of the context a chapter needs to be written: one rule for the chapter loop (its
prompt must leave this room before the first turn, ``agent.nst.loop``) and for the planner
(how many chapters a story needs so that each one fits, ``agent.nst.planning``).

An unwritten chapter needs room for its prose draft, or for the accepted text kept in the
conversation plus its state update, whichever is larger, plus a slack for the short messages
of the turns.
"""

from __future__ import annotations

import math

from agent.gate import Gate
from agent.nst.length import size_tokens

TURN_SLACK = 400
"""Room kept for the short messages the writes add (calls, prose requests, verdicts, a rejected draft's
placeholder); a sixteenth of a smaller context."""
MIN_UPDATE_OUTPUT = 1024
ESTIMATE_MARGIN = 1.4
"""The characters estimate counts English prose at about 1.85 tokens a word against a model's ~1.3."""


def update_output(context: int | None, update_max_tokens: int) -> int:
    """The least room an update reply gets: a sixth of the context, 256 to 1024 tokens."""
    floor = MIN_UPDATE_OUTPUT if context is None else max(256, min(MIN_UPDATE_OUTPUT, context // 6))
    return min(update_max_tokens, floor)


def turn_slack(context: int | None) -> int:
    return TURN_SLACK if context is None else min(TURN_SLACK, max(96, context // 16))


def text_tokens(gate: Gate, ratio: float, *, exact: bool) -> int:
    """Tokens of an accepted chapter in the conversation (the top of the gate, at the ratio); an
    estimating counter counts prose higher than the model's tokenizer, so it gets margin."""
    return math.ceil(gate.high * max(ratio, 1.0) * (1.0 if exact else ESTIMATE_MARGIN)) + 16


def unwritten_room(gate: Gate, ratio: float, *, context: int | None, exact: bool, prose_cap: int, trim: bool,
                   update_max_tokens: int, with_state: bool) -> int:
    """Tokens an unwritten chapter needs beyond its prompt."""
    prose = size_tokens(gate, ratio, cap=prose_cap, use_min=False, trim=trim)[0]
    update = update_output(context, update_max_tokens) if with_state else 0
    return max(prose, text_tokens(gate, ratio, exact=exact) + update) + turn_slack(context)
