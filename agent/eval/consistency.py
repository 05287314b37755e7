"""The extended ConStory-Bench judge (NstAgent 3.3, A.1, A.2): five calls per story.

Each call covers one category and returns contradiction instances with two verbatim quotes,
their chapters and a subtype from that category's closed enum. A scope marker stands before
the terminal window; the judge reports only contradictions whose later half lies after it,
using everything before it as evidence, except ``abandoned_plot_elements``, which is checked
over the whole story. The story is delimited as untrusted data in every prompt.

A book longer than a judge's context (an imported novel: 200K words against a local model's
32K tokens) cannot be judged whole: :func:`judge_spans` judges it in consecutive spans of
chapters that fit, each span on its own (every chapter of a span in scope, its chapters
numbered as in the book), so a contradiction between two spans is not found. That is
``fabula check``'s private check of a long manuscript; ``fabula eval consistency`` keeps the
protocol above (the whole story in each call) and says so before it sends a call that cannot fit.
"""

from __future__ import annotations

from dataclasses import replace

from agent.eval.judge import DATA_RULE, Call, Judge, as_data, run_calls
from agent.eval.story import Story
from agent.eval.windows import Window, choose_window
from agent.store import RunStore
from grammars.judges import CATEGORIES, CONSISTENCY_GRAMMARS

KIND = "consistency"
PROTOCOL_VERSION = "consistency-v1"
MARKER = "=== SCOPE MARKER: THE EVALUATION WINDOW BEGINS HERE ==="

CATEGORY_NAMES = {
    "characterization": "Characterization",
    "factual_detail": "Factual detail",
    "narrative_style": "Narrative style",
    "timeline_plot": "Timeline and plot",
    "world_building": "World building",
}

SUBTYPE_DEFINITIONS = {
    "memory_contradictions": "a character remembers, or forgets, past events in a way that contradicts what happened",
    "knowledge_contradictions": "a character knows something they could not know, or does not know something "
    "they were shown to know",
    "skill_power_fluctuations": "a character's skill, strength or power changes without any cause in the story",
    "forgotten_abilities": "an ability a character was shown to have is ignored when it would obviously be used",
    "appearance_mismatches": "a person's, object's or place's physical description changes without cause",
    "nomenclature_confusions": "a name, title or term is given inconsistently, or two entities are confused",
    "quantitative_mismatches": "numbers, counts, ages, distances or amounts disagree",
    "perspective_confusions": "the narrative point of view or narrator shifts inconsistently",
    "tone_inconsistencies": "the tone changes abruptly without narrative motivation",
    "style_shifts": "the prose style or register changes abruptly without narrative motivation",
    "absolute_time_contradictions": "dates, times of day, seasons or years disagree",
    "duration_contradictions": "how long something took or lasted disagrees",
    "simultaneity_contradictions": "a character or object is in two places at once, or events overlap impossibly",
    "causeless_effects": "an outcome happens without the cause the story requires",
    "causal_logic_violations": "events follow from causes in a way that contradicts the story's own logic",
    "abandoned_plot_elements": "a plot thread, promise, mystery or setup is introduced and then never resolved "
    "or acknowledged",
    "core_rules_violations": "the story breaks a rule of its own world (magic, technology, physics) it established",
    "social_norms_violations": "established customs, hierarchies or laws of the story's society are broken "
    "without acknowledgement",
    "geographical_contradictions": "locations, distances or the layout of places disagree",
}


def protocol_key(story: Story, window: Window) -> str:
    """Everything a reply depends on: protocol version, window start and the story text."""
    return f"{PROTOCOL_VERSION}|first={window.first}|{story.digest[:16]}"


def render_story(story: Story, window: Window) -> str:
    """The story with chapter headers and the scope marker before the window's first chapter."""
    parts = []
    for position, section in enumerate(story.sections, start=1):
        if position == window.first:
            parts.append(MARKER)
        text = section.text.replace(MARKER, "=== (marker-like text removed) ===")
        parts.append(f"[Chapter {section.index}: {section.title}]\n{text}")  # a span keeps the book's numbers
    return "\n\n".join(parts)


def system_prompt(category: str) -> str:
    subtypes = "\n".join(f"- {name}: {SUBTYPE_DEFINITIONS[name]}" for name in CATEGORIES[category])
    global_rule = ""
    if category == "timeline_plot":
        global_rule = (
            "\nException: abandoned_plot_elements remains a check over the full narrative. Report an "
            "abandoned plot element wherever it occurs; its exact_quote may be anywhere in the story, "
            "and its contradicting_quote is the last passage where the thread could or should have been "
            "taken up."
        )
    return (
        "You are a meticulous continuity editor. You find internal contradictions in a story, in one category "
        f"only: {CATEGORY_NAMES[category]}.\n\nSubtypes of this category:\n{subtypes}\n\n"
        f"{DATA_RULE}\n\n"
        f'Scope: the story contains the line "{MARKER}". Report a contradiction only if its later manifestation '
        "(contradicting_quote) lies after that line. Use the entire text before the line as evidence: the earlier "
        f"statement (exact_quote) may be anywhere before the contradicting passage.{global_rule}\n\n"
        "For each contradiction: copy exact_quote and contradicting_quote verbatim from the story (a sentence or "
        "clause, exactly as written, without ellipses or paraphrase); give the chapter number from the "
        '"[Chapter N: ...]" header of each; choose the one subtype that fits; explain briefly why both cannot be '
        "true. Report each distinct contradiction once. Report only real contradictions within the story itself, "
        "not matters of taste. If there are none, return an empty list. Reply with the JSON object only."
    )


def build_calls(story: Story, window: Window) -> list[Call]:
    rendered = as_data(render_story(story, window))
    meta = {"window": window.as_dict(), "digest": story.digest, "words": story.words}
    calls = []
    for category in CATEGORIES:
        user = (
            f"Story (chapters {story.sections[window.first - 1].index}-{story.sections[-1].index} are after "
            f"the scope marker):\n\n"
            f"{rendered}\n\nList every {CATEGORY_NAMES[category].lower()} contradiction in scope."
        )
        messages = [{"role": "system", "content": system_prompt(category)}, {"role": "user", "content": user}]
        calls.append(Call(category, messages, CONSISTENCY_GRAMMARS[category], meta))
    return calls


def judge_consistency(
    store: RunStore, story: Story, judge: Judge, *, window_chapters: int | None = None, window_words: int | None = None
) -> tuple[Window, dict[str, int]]:
    """Run the missing category judgments of one story; returns the window and call counts."""
    window = choose_window(story, chapters=window_chapters, min_words=window_words)
    counts = run_calls(store, judge, KIND, protocol_key(story, window), build_calls(story, window))
    return window, counts


SPAN = "span"
"""The protocol mark of a span's judgments: ``consistency-v1|span=A-B|...``."""
TOKENS_PER_CHAR = 0.3
"""A generous estimate of tokens per character of English prose, for fitting a judge's context."""
PROMPT_ROOM = 1500
"""Tokens of a judge prompt besides the story (the rules, the subtypes, the chapter headers)."""


def story_tokens(story: Story) -> int:
    """About how many tokens the story takes in a judge prompt."""
    return int(sum(len(s.text) + len(s.title) + 20 for s in story.sections) * TOKENS_PER_CHAR) + PROMPT_ROOM


def fits(story: Story, judge: Judge, window: Window | None = None) -> bool | None:
    """Whether every category call with the whole story leaves the judge room for a judgment of
    ``min_output`` tokens, counted as the call itself is fitted (:meth:`Judge.fit`; None: the
    context is unknown)."""
    budget = judge.budget()
    if budget.limit is None:
        return None
    calls = build_calls(story, window or choose_window(story))
    return all(budget.count(c.messages) + judge.min_output <= budget.limit for c in calls)


def span_words(judge: Judge) -> int | None:
    """The most words of story a span may hold to fit the judge's context (None: unknown)."""
    limit = judge.budget().limit
    if limit is None:
        return None
    room = limit - judge.min_output - PROMPT_ROOM
    return max(200, int(room / TOKENS_PER_CHAR / 6))  # about 6 characters a word with its space


def spans(story: Story, max_words: int) -> list[tuple[int, int]]:
    """Consecutive chapter ranges ``(first, last)`` (the book's chapter numbers), each of at most
    ``max_words`` words (a chapter longer than that is a span of its own)."""
    out: list[tuple[int, int]] = []
    first: int | None = None
    total = previous = 0
    for section in story.sections:
        if first is not None and total + section.words > max_words:
            out.append((first, previous))
            first, total = None, 0
        if first is None:
            first = section.index
        total += section.words
        previous = section.index
    if first is not None:
        out.append((first, previous))
    return out


def judge_spans(
    store: RunStore, story: Story, judge: Judge, *, max_words: int
) -> list[tuple[tuple[int, int], dict[str, int]]]:
    """Judge the story in spans of at most ``max_words`` words, each span whole and on its own;
    a span's judgments are tied to the whole story's text (its digest), so an edit anywhere
    asks them again. Returns each span with its call counts."""
    out = []
    for first, last in spans(story, max_words):
        sections = [s for s in story.sections if first <= s.index <= last]
        part = replace(story, sections=sections)
        window = choose_window(part, chapters=len(sections))
        prefix = sum(s.words for s in story.sections if s.index < first)
        absolute = replace(
            window,
            first=first,
            prefix_words=prefix,
            total_words=story.words,
            rule=f"span: chapters {first}-{last}, each span judged on its own",
        )
        calls = [
            Call(
                c.item,
                c.messages,
                c.grammar,
                {**c.meta, "window": absolute.as_dict(), "digest": story.digest, "span": [first, last]},
            )
            for c in build_calls(part, window)
        ]
        key = f"{PROTOCOL_VERSION}|{SPAN}={first}-{last}|{story.digest[:16]}"
        out.append(((first, last), run_calls(store, judge, KIND, key, calls)))
    return out
