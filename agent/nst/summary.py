"""RollSum's story-so-far summary: the prompt and the call that rewrites it after a chapter.

Its own module so that writing a chapter (``rollsum``) and re-deriving the summary of an edited
chapter (``rederive``) share it without importing each other.
"""

from __future__ import annotations

from agent.llm.types import Message
from agent.nst.budget import Budget
from agent.nst.config import RollSumConfig
from agent.run_context import RunContext

SYSTEM = "You are a novelist writing a long story one chapter at a time. Write in the language of the prompt."


def summary_messages(summary: str, index: int, text: str) -> list[Message]:
    user = (f"Summary of the story so far:\n{summary or '(empty: this is the first chapter)'}\n\n"
            f"New chapter {index}:\n{text}\n\nRewrite the summary of the story so far so that it also covers the "
            "new chapter. Keep every fact a later chapter may need: names, ages, dates, places, what each "
            "character knows and has, promises not yet kept. Reply with the summary only.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def summarize(ctx: RunContext[RollSumConfig], budget: Budget, summary: str, index: int, text: str) -> str:
    """The summary after chapter ``index`` (also how ``fabula edit`` re-derives it from an edited chapter)."""
    config = ctx.config
    reply = budget.generate(ctx.llm, summary_messages(summary, index, text), temperature=config.temperature,
                            max_tokens=config.summary_max_tokens, min_output=min(config.summary_max_tokens, 512),
                            role="rollsum_summary", what=f"the summary after chapter {index}")
    return reply.text.strip()
