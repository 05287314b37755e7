"""The judge call of ``--drafts N --drafts-judge``: the run's own model chooses among a chapter's drafts.

One constrained call (``grammars.drafts.DraftChoice``): the outline item the chapter carries out, the
narrative state before it and every draft, numbered; the reply names a draft and says why in one line.
Roles: one system message, then one user turn (strict role order). A reply that cannot be used (the call
failed or was refused, a draft that was not shown) has no draft: the caller falls back to the model-free
rule and says so.
"""

from __future__ import annotations

from typing import Any

from agent.llm import LLM, EndpointUnavailableError, LLMError
from agent.llm.budget import Budget
from agent.nst.state import NarrativeState
from grammars.drafts import DraftChoice

ROLE = "drafts_judge"
REPLY_TOKENS = 256
SYSTEM = "You are a novel's editor. You choose the best of several drafts of one chapter and say why in one line."


def judge_request(item: dict[str, Any], state: NarrativeState | None, drafts: list[dict[str, Any]]) -> str:
    shown = "\n\n".join(f"## Draft {d['k']} ({d['words']} words)\n{d['text']}" for d in drafts)
    before = state.render() if state is not None else "(no tracked state)"
    return (
        f'The outline item this chapter must carry out: chapter {item.get("id")}, "{item.get("title")}": '
        f"{item.get('description', '')} (target {item.get('target_words')} words)\n\n"
        f"The narrative state of the story before this chapter:\n{before}\n\n"
        f"{len(drafts)} drafts of the chapter:\n\n{shown}\n\n"
        "Choose the draft that best carries out the outline item, stays true to the state (names, facts, "
        "possessions, places, past events) and reads best, with the fewest stock phrases of machine prose. "
        "Reply as JSON: the draft's number and a one-line reason."
    )


def judge_drafts(
    llm: LLM, budget: Budget, item: dict[str, Any], state: NarrativeState | None, drafts: list[dict[str, Any]]
) -> tuple[int | None, str]:
    """``(k, reason)`` of the draft the judge chooses, or ``(None, why not)`` when its reply cannot be used
    (a call refused or failed, a context too small for the drafts, a draft it was not shown)."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": judge_request(item, state, drafts)}]
    try:
        reply = budget.generate(
            llm,
            messages,
            DraftChoice,
            temperature=0.0,
            max_tokens=REPLY_TOKENS,
            min_output=64,
            role=ROLE,
            what="the drafts judge",
        )
        parsed = reply.parsed if isinstance(reply.parsed, DraftChoice) else DraftChoice.model_validate(reply.parsed)
    except EndpointUnavailableError:
        raise  # the server is gone: the run stops and a resume asks again
    except (LLMError, ValueError) as exc:
        return None, " ".join(str(exc).split())[:200]
    if parsed.draft not in {int(d["k"]) for d in drafts}:
        return None, f"it named draft {parsed.draft}, which it was not shown"
    return parsed.draft, " ".join(parsed.reason.split())
