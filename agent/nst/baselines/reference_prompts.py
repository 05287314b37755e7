"""RollSum's and Direct's requests shaped as the NstAgent reference's (``reference_prompts``), in this project's
own words: the same information, headings, order and placement as ``code/baselines/rolling_summary.py``
(``chapter_prompt``, ``summary_prompt``, ``SYSTEM_PROMPTS``) and ``code/baselines/direct.py``
(``direct_prompt``) at e05b9b3, none of their text. Why: the paper profile must send what the reference
method sends, and the project ships no text of the reference.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from agent.gate import Gate
from agent.llm.types import Message
from agent.nst.chapter.planned import PlannedChapter

CHAPTER_SYSTEM = (
    "You are a seasoned author of long novels. From the whole outline and the summary of the story so far, "
    "write the current chapter in full."
)
SUMMARY_SYSTEM = (
    "You keep a short running summary of a long novel. Keep what later chapters need: where each character "
    "stands, the key events, how relationships have changed, the timeline and the threads still open. "
    "Compress what is settled; never retell scenes, dialogue or prose."
)
DIRECT_SYSTEM = (
    "You are a seasoned novelist. Write the whole story in one reply: characters who grow, a world that stays "
    "consistent, a plot that follows from itself and an arc that is completed."
)


def chapter_messages(
    prompt: str, outline: Sequence[PlannedChapter], summary: str, item: PlannedChapter, gate: Gate, voice: str = ""
) -> list[Message]:
    """A RollSum chapter as the reference asks for it: the prompt, the whole frozen outline as JSON, the
    summary, then the task (its target and range, prose only, this chapter only, aim at the target);
    ``voice``: fabula's bible, style and language blocks (empty in a paper run), before the task."""
    whole = json.dumps([c.as_json() for c in outline], ensure_ascii=False, indent=2)
    task = (
        f"# Current task\nWrite chapter {item.id}.\nChapter title: {item.title}\n"
        f"What happens in it: {item.description}\n"
        f"Length: {gate.describe()} words. Stay within ±20 % of the target.\n\n"
        "Reply with this chapter's prose and nothing else: no summary, no word count, no plan, no remarks. "
        "You can see the whole outline, but write only this chapter: begin no later chapter, fold none into "
        "this one, and stop as soon as this chapter is done. Write toward the target, not the top of the "
        "range: start resolving the chapter at about 85-90 % of the target and close it near the target "
        "without padding. The outline is a plan: turn it into scenes, dialogue, sensory detail and inner life."
    )
    user = (
        f"# Story prompt\n{prompt}\n\n# The whole outline (frozen)\n{whole}\n\n"
        f"# The story so far, summarized\n{summary or 'Nothing yet: this is the first chapter.'}\n\n"
        + (f"{voice}\n\n" if voice else "")
        + task
    )
    return [{"role": "system", "content": CHAPTER_SYSTEM}, {"role": "user", "content": user}]


def summary_messages(prompt: str, summary: str, index: int, title: str, text: str) -> list[Message]:
    """The summary after chapter ``index`` as the reference asks for it (no word limit): the story prompt,
    the previous summary, the new chapter, then the instruction; the length is the model's."""
    user = (
        f"Story prompt:\n{prompt}\n\nThe summary of the story so far:\n{summary or 'None'}\n\n"
        f"Chapter {index}, {title}, just written:\n{text}\n\n"
        "Reply with the updated summary of the story so far and nothing else: no judgement of the chapter, "
        "no advice on the writing, no remarks. Make it as long as it must be to keep everything a later "
        "chapter may need and no longer, and never continue the story."
    )
    return [{"role": "system", "content": SUMMARY_SYSTEM}, {"role": "user", "content": user}]


def direct_messages(prompt: str, gate: Gate, voice: str = "") -> list[Message]:
    """The Direct story as the reference asks for it: the prompt, then the output rules with the target and
    range last, nearest the reply; ``voice``: fabula's blocks (empty in a paper run), after the prompt."""
    user = (
        f"Story prompt:\n{prompt}\n\n"
        + (f"{voice}\n\n" if voice else "")
        + "# What to reply\nReply with the story's prose and nothing else: no outline, no word count, no plan, "
        "no tool call, no remarks.\n"
        f"Length: {gate.describe()} words. Keep about the last 10 % for the resolution after the climax, "
        "resolve the central conflict within the accepted range, and stop right after the last sentence "
        "instead of writing on to the token limit."
    )
    return [{"role": "system", "content": DIRECT_SYSTEM}, {"role": "user", "content": user}]
