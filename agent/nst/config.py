"""Every setting of the NstAgent pipeline and its baselines, typed, with the paper's defaults.

The whole configuration is stored (and fingerprinted) with the run, so a resume with different
settings is refused unless forced, and every figure can be traced to the settings behind it.
Ranges are checked once, when a run is configured (``agent.settings.Settings.parse``).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import Field, model_validator

from agent.gate import DEFAULT_HIGH, DEFAULT_LOW, Gate
from agent.limits import MAX_WORDS, TOKEN_CAP
from agent.nst.paper_profile import PAPER_DIRECT, PAPER_NST, PAPER_ROLLSUM
from agent.settings import (
    INPUT,
    SMALL_PROSE_LONG_PROMPTS,
    SMALL_STRUCTURED_LONG_PROMPTS,
    Source,
    WritingControls,
    own,
)

PLANNER_VERSION = "2"
"""2: the outline stage also asks for the book's title (a version-1 cached plan has none)."""


SIZED = (
    "sized from the gate (1.25 × the range's top × tokens per word + 64): a runaway draft stops sooner, and a "
    "server's KV cache holds more requests at once"
)
"""Why the default sizes the prose budget instead of fixing it (the sources below cite it)."""
STAGES = (
    "a premise from 3K words, a synopsis above 10K, acts from 40K: planning in shorter steps for the lengths a "
    "local model writes"
)
GATE = Source(
    "NstAgent §3.1, App. A.1; reference agent_core.py:62, generation_common.py:23 `WORD_COUNT_TOLERANCE`",
    "a chapter (Direct: the story) is accepted within ±20 % of its target",
)
TURN_BUDGET = (
    "reference README.md:75-76; agent_core.py:3374 `LongStoryAgent._chapter_max_tokens`",
    "the ceiling of every chapter turn, 32,768 (`--max-tokens`), under which each turn gets "
    "min(32768, max(1024, ⌈1.35 × target + 1536⌉)) tokens (`turn_token_overhead`)",
)
"""Where and what the reference's per-turn budget is: one for a tool turn, an update and the prose alike."""


class StoryTarget(WritingControls):
    """What every chapter-based method is asked to write: the prompt and its length."""

    PROSE_ROLES: ClassVar[frozenset[str]] = frozenset({"nst_prose", "rollsum_chapter", "direct_story"})
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {
        "small": {
            "prose_sampling": SMALL_PROSE_LONG_PROMPTS,
            "structured_sampling": SMALL_STRUCTURED_LONG_PROMPTS,
            "min_tokens": True,
            "trim_cut_drafts": True,
        },
        "paper": PAPER_DIRECT,
    }

    prompt: Annotated[str, INPUT] = Field(min_length=1, max_length=200_000)
    prompt_id: Annotated[str | None, INPUT] = None
    language: Annotated[
        str | None,
        own(
            "the language to write in; none: the prompt's own, as the reference detects it "
            "(agent_core.py:904 `detect_language`)"
        ),
    ] = Field(None, max_length=40)
    """The language to write in (``--language``); None: the prompt's own (``agent.language.detect``)."""
    words: Annotated[int, INPUT] = Field(ge=1, le=MAX_WORDS)
    """The story's length; ``fabula write`` asks for at least MIN_WORDS, tests and benchmarks may go lower."""
    temperature: Annotated[
        float,
        Source("NstAgent App. A.1; reference README.md:75 `--temperature 0.7`", "0.7 for every call").but(
            rollsum=Source("NstAgent App. A.1; reference README.md:89 `--temperature 0.7`", "0.7 for every call"),
            direct=Source("NstAgent App. A.1; reference direct.py:51 `DEFAULT_TEMPERATURE`", "0.7"),
        ),
    ] = Field(0.7, ge=0.0, le=2.0)
    gate_low: Annotated[float, GATE] = Field(DEFAULT_LOW, gt=0.0, le=1.0)
    gate_high: Annotated[float, GATE] = Field(DEFAULT_HIGH, ge=1.0, le=3.0)
    tokens_per_word: Annotated[
        float | None,
        own(
            "the first guess of tokens per word for sizing budgets, then measured; the reference sizes its "
            "budgets at 1.35 (agent_core.py:102)"
        ),
    ] = Field(None, gt=0.1, le=10.0)
    """Initial tokens-per-word estimate; None: 1.4 (Latin) or 1.5 (CJK), then measured."""
    min_tokens: Annotated[
        bool,
        Source(
            "NstAgent App. A.1",
            "no floor; every method rejects a reply that reaches its token limit, none asks for a minimum",
            "more first drafts land in the gate with local models that stop early",
        ),
    ] = True
    """Ask the backend for a floor on prose tokens sized from the gate."""
    prose_max_tokens_cap: Annotated[
        int, own("the top of the prose budget sized from the gate (`prose_max_tokens` none)")
    ] = Field(32768, ge=64, le=TOKEN_CAP)
    prose_max_tokens: Annotated[
        int | None,
        Source(
            "reference README.md:75-76; agent_core.py:3374 `LongStoryAgent._chapter_max_tokens`",
            "every chapter turn (the prose travels in `write`) gets min(32768, max(1024, ⌈1.35 × target + 1536⌉)) "
            "tokens (2,886 for 1,000 words): the ceiling 32,768 with `turn_token_overhead` 1536",
            SIZED,
        ).but(
            rollsum=Source(
                "NstAgent App. A.1; reference README.md:88-91; rolling_summary.py:525 `chapter_budget`, "
                ":126 `next_dynamic_token_budget`, :762",
                "the paper gives 32,768 per chapter call, the reference min(32768, max(1024, ⌈1.35 × target + 1536⌉)), "
                "grown ×1.5 (at least +1,024, at most 32,768) after a reply cut at its limit (the ceiling 32,768 "
                "with `turn_token_overhead` 1536; the reference decides)",
                SIZED,
            ),
            direct=Source(
                "NstAgent App. A.1; reference direct.py:50 `DEFAULT_MAX_TOKENS`",
                "32,768 for the one full-story call (fixed: the README publishes no Direct command)",
                SIZED,
            ),
        ),
    ] = Field(None, ge=64, le=TOKEN_CAP)
    """A fixed prose ceiling, the paper's; None: sized from the gate (1.25 x the range's top in tokens
    + 64, under ``prose_max_tokens_cap``). Either way fitted to the context."""
    trim_cut_drafts: Annotated[
        bool, Source("NstAgent App. A.1", "a reply that stops at its token limit is never accepted")
    ] = False
    """A draft cut at max_tokens is cut back to its last complete sentence and accepted if it then
    lies inside the gate (recorded as trimmed). Off by default: the papers reject a cut draft."""
    context_tokens: Annotated[int | None, own("the model's context, which every request is fitted to")] = Field(
        None, ge=512, le=TOKEN_CAP
    )
    """The model's context (--context-tokens); None: the server's max_model_len, else the embedded
    model's config, else unknown (nothing budgeted). Every request is fitted to it (agent.llm.budget)."""
    context_reserve: Annotated[int, own("tokens kept free of every request")] = Field(64, ge=0, le=16384)
    """Tokens kept free of every request (prompt + max_tokens <= context - reserve)."""
    chapter_restarts: Annotated[
        int | None,
        Source(
            "reference README.md:78, :92 (`--auto-resumes 3`); agent_core.py:3873-3880, :5459, :5484; "
            "rolling_summary.py:1117",
            "a chapter that fails (the turn cap, the attempt limit) is not kept: the story resumes from its "
            "checkpoint up to 3 times, then it is a failed story",
            "a long local run keeps the closest draft, marked degraded, rather than lose the story",
        ).but(
            direct=Source(
                "reference direct.py:374",
                "a story that fails its attempts is recorded as a failure; nothing resumes it",
                "a long local run keeps the closest draft, marked degraded, rather than lose the story",
            )
        ),
    ] = Field(None, ge=0, le=20)
    """Restarts of a failed chapter from its checkpoint before the run fails (``agent.nst.chapter.restarts``);
    None: the closest draft is kept, marked degraded."""

    def gate(self, target_words: int) -> Gate:
        """The length gate of a chapter (or story) of ``target_words``, at this run's bounds."""
        return Gate.for_target(target_words, self.gate_low, self.gate_high)

    @model_validator(mode="after")
    def _prompt_not_blank(self) -> Self:
        if not self.prompt.strip():
            raise ValueError("the story prompt is empty")
        return self


class Planned(StoryTarget):
    """Methods that write from the frozen outline (NstAgent, RollSum)."""

    outline_attempts: Annotated[
        int,
        Source(
            "reference agent_core.py:59 `MAX_JSON_RETRIES`, :2250 `OutlineAgent._chat_json`",
            "5 attempts at the chapter outline, each failure told to the model",
            "a constrained outline rarely fails: 3 attempts bound a broken server's cost",
        ),
    ] = Field(3, ge=1, le=20)
    plan_cache: Annotated[str | None, own("where plans are cached (the reference's `--outline-cache-dir`)")] = None
    """Folder; None: $FABULA_HOME/plans."""
    planner_max_tokens: Annotated[
        int,
        Source(
            "reference README.md:68 (`build_outline_cache.py --max-tokens 32768`, build_outline_cache.py:165)",
            "32,768 tokens for every planner stage (the code's own `DEFAULT_MAX_TOKENS`, 16,384 at "
            "agent_core.py:49, is what the published command overrides)",
            "shorter stage replies fit 8K-32K contexts",
        ),
    ] = Field(2048, ge=64, le=TOKEN_CAP)
    turn_token_overhead: Annotated[
        int | None,
        Source(
            "reference README.md:75-76, :90-91 (`--chapter-token-control dynamic --dynamic-token-overhead 1536`); "
            "agent_core.py:3374 `_chapter_max_tokens`, rolling_summary.py:525 `chapter_budget`",
            "every chapter call gets min(ceiling, max(1024, ⌈1.35 × target + 1536⌉)) tokens (0.85 per CJK "
            "character); RollSum grows it ×1.5 (at least +1,024) after a reply cut short of the range",
            "fabula sizes prose from the gate and gives tool turns and updates budgets of their own",
        ),
    ] = Field(None, ge=0, le=TOKEN_CAP)
    """The reference's dynamic chapter budget: each chapter call's ``max_tokens`` is the chapter's target in
    tokens plus this overhead, under the call's own ceiling (``agent.nst.chapter.sizing.reference_budget``);
    None: fabula's budgets."""
    premise_from: Annotated[
        int,
        Source(
            "reference agent_core.py:2156 `stage_count_for_words`; NstAgent App. A.2",
            "in the reference the chapter outline alone below 10,000 words, a premise from 10,000; in the paper a "
            "premise at every length (the reference decides)",
            STAGES,
        ),
    ] = Field(3_000, ge=0, le=MAX_WORDS + 1)
    """Stories of at least this many words get a premise stage (the reference: from 10K)."""
    synopsis_from: Annotated[
        int,
        Source(
            "reference agent_core.py:2156 `stage_count_for_words`; NstAgent App. A.2",
            "in the reference a synopsis from 20,000 words, in the paper above 10K (the reference decides)",
            STAGES,
        ),
    ] = Field(10_001, ge=0, le=MAX_WORDS + 1)
    """... a synopsis stage (the reference: from 20K)."""
    acts_from: Annotated[
        int,
        Source(
            "reference agent_core.py:2156 `stage_count_for_words`; NstAgent App. A.2",
            "in the reference acts from 100,000 words, in the paper above 10K (the reference decides)",
            STAGES,
        ),
    ] = Field(40_000, ge=0, le=MAX_WORDS + 1)
    """... an act stage (the reference: from 100K)."""
    synopsis_words: Annotated[
        bool,
        Source(
            "reference agent_core.py:2407 `OutlineAgent.generate`",
            "the synopsis asks for about 1,000 words, 2,500 when the act stage follows",
            "no word target: a short synopsis leaves room in a small context",
        ),
    ] = False
    """Ask the synopsis for the reference's ~1,000 words (~2,500 with the act stage)."""
    free_outline: Annotated[
        bool,
        Source(
            "reference agent_core.py:218 `outline_chapters_prompt`",
            "about N chapters, adjustable; each chapter's words up to the model, key chapters more",
            "the grammar fixes the count and keeps each target in the gate around an even share: a constrained "
            "decoder meets the length rule by construction (small models cannot add up)",
        ),
    ] = False
    """The paper's outline freedom: the planner may adjust the chapter count and give key chapters
    more words (the plain outline grammar); off, the grammar fixes the count and keeps each
    chapter within the gate around an even share. The validator judges the outline either way."""
    outline_style: Annotated[
        Literal["fabula", "reference"],
        Source(
            "reference agent_core.py:2139 `recommend_chapter_count`, :218 `outline_chapters_prompt`, :2250 "
            "`_chat_json`, :737 `extract_json`, :2321 `_validate_chapter_outline`, :2373 `_normalise_chapters`",
            "about N chapters (the anchors, rounded up), asked for as a JSON array of {id, name, description, "
            "word_count} numbered from 0 with no book title; the reply free text under no grammar, its JSON "
            "read from it, the count free, the word counts summing to ±20 % and kept as given; a refused reply "
            "asked again with the error, up to `outline_attempts` in all",
            "`{title, chapters}` from 1 under a grammar, the count rounded and held to ±25 %: a small model's "
            "reply always parses, and the book gets a title of its own",
        ),
    ] = "fabula"
    """How the chapter outline is asked for and read: "fabula", ``{title, chapters}`` from 1 under the
    outline grammar; "reference", as the NstAgent reference code (``agent.nst.plan.reference``): a free
    JSON array from 0, converted to fabula's outline (ids from 1, the book's title made from the prompt)."""


SMALL_UPDATE_MAX_TOKENS = 896
"""The small profile's update budget: room for the longest reply its grammar allows. The field
limits of :data:`agent.settings.SMALL_NST_STRING_CHARS` and one entry per array
(:data:`SMALL_UPDATE_ENTRY_LIMIT`) bound an update at 2,451 characters, 885 tokens at the median
2.77 characters a token of the 135M model's update replies; at 512 tokens (the budget before)
an update was cut one token before its end, a failed call. The default 4,096 let runaways fill
the context before the grammar had a bound (docs/design/embedded-speed.md)."""


SMALL_UPDATE_ENTRY_LIMIT = 1
"""The small profile's most entries per update array: one character, one fact, one event, one
requirement. Two let a 135M model's update of junk fields still pass its 512 tokens (a character
listed twice, facts and all; six of ten failed calls in eight 600-word runs were such updates, each
of one or two characters and one or two events), which the field limits of
:data:`agent.settings.SMALL_NST_STRING_CHARS` alone did not stop (docs/design/embedded-speed.md)."""


SMALL_FAILED_UPDATE_LIMIT = 1
"""The small profile takes the fallback update after one failed update attempt: in two 600-word
runs of SmolLM2-135M none of 20 update attempts was accepted (14 ran away or were cut, 6 refused),
and each further failed turn cost two failed calls, a runaway and its retry
(docs/design/embedded-speed.md)."""


class NstConfig(Planned):
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {
        "small": {
            **StoryTarget.PROFILES["small"],
            "min_past_events": 1,
            "update_max_tokens": SMALL_UPDATE_MAX_TOKENS,
            "failed_update_limit": SMALL_FAILED_UPDATE_LIMIT,
            "fallback_full_update": False,
            "update_entry_limit": SMALL_UPDATE_ENTRY_LIMIT,
            "ask_again_looped_update": False,
        },
        "paper": PAPER_NST,
    }
    """The small profile also asks every state update for at least one past event: a tiny model's
    cheapest legal update is an empty one, and an empty chronology leaves later chapters nothing;
    it caps an update reply at :data:`SMALL_UPDATE_MAX_TOKENS`, takes the fallback after
    :data:`SMALL_FAILED_UPDATE_LIMIT` failed attempt, the fallback asks for one event only (no
    full fallback update was accepted in three runs; half of them ran away, failed calls), an
    update array holds at most :data:`SMALL_UPDATE_ENTRY_LIMIT` entries, and an update asked alone
    that loops is not asked again (the fallback follows)."""

    state: Annotated[
        bool,
        Source(
            "NstAgent §5.2 (Table 6); reference README.md:82 (`ablations.py --ablation no_state`)",
            "the method keeps the state; without it is an ablation",
        ),
    ] = True
    """--no-state: no state, no update tool, no state guidance."""
    lookback: Annotated[
        bool,
        Source(
            "NstAgent §5.2 (Table 6); reference README.md:82 (`ablations.py --ablation no_lookback`)",
            "read, search and correct are offered; without them is an ablation",
        ),
    ] = True
    """--no-lookback: no read, search or correct."""
    max_turns: Annotated[
        int, Source("NstAgent App. A.1; reference README.md:77 `--max-turns-per-chapter 50`", "50 turns per chapter")
    ] = Field(50, ge=3, le=500)
    read_budget: Annotated[
        int, Source("NstAgent App. A.1; reference agent_core.py:53 `MAX_READ`", "3 reads per chapter")
    ] = Field(3, ge=0, le=100)
    search_budget: Annotated[
        int, Source("NstAgent App. A.1; reference agent_core.py:54 `MAX_SEARCH`", "5 searches per chapter")
    ] = Field(5, ge=0, le=100)
    search_hits: Annotated[
        int, Source("NstAgent App. A.1; reference agent_core.py:55 `SEARCH_MAX_HITS`", "8 windows per search")
    ] = Field(8, ge=1, le=100)
    search_style: Annotated[
        Literal["fabula", "reference"],
        Source(
            "reference agent_core.py:953-1124 `ChapterSearchIndex`, :4015 `_tool_search`",
            "one column holding the centre sentence's tokens three times and its neighbours' once (unicode61, no "
            "stemming), query tokens under 2 characters dropped, plain bm25() with ties toward later chapters, "
            "the hits as JSON {chapter_id, sentence, before, after}",
            "three weighted columns with stemming find inflected forms; passages as text read more easily to a "
            "small model",
        ),
    ] = "fabula"
    """How the search tool tokenizes, ranks and answers: "fabula", three weighted columns with stemming,
    ties toward earlier chapters, passages as text; "reference", as the NstAgent reference code
    (docs/design/search.md)."""
    correct_budget: Annotated[
        int,
        Source("NstAgent App. A.1; reference agent_core.py:56 `MAX_CORRECT_PER_CHAPTER`", "3 corrections per chapter"),
    ] = Field(3, ge=0, le=100)
    failed_call_budget: Annotated[
        int, own("failed tool calls before only the required steps are offered (with `required_after_failures`)")
    ] = Field(5, ge=0, le=100)
    """Failed tool calls per chapter before only the required steps are offered."""
    required_after_failures: Annotated[
        bool,
        Source(
            "reference agent_core.py:1908 `chapter_tools`, :1989 `chapter_tools_for_phase`",
            "no such rule; every tool is offered on every turn, whatever failed",
            "a model stuck on a bad call moves on",
        ),
    ] = True
    """Offer only the required steps once ``failed_call_budget`` is spent (fabula's; the reference has no such rule)."""
    fallback_update: Annotated[
        bool,
        Source(
            "NstAgent App. A.1; reference agent_core.py:3873-3880 `LongStoryAgent._run_chapter_loop`, "
            ":5484 `generate_story_with_auto_resume`; README.md:78",
            "no update past the cap; a chapter with no DONE after 50 turns fails, and the story resumes from its "
            "last checkpoint, up to 3 times (`--auto-resumes 3`). fabula's paper profile today: the closest draft "
            "is kept as a degraded chapter and the story goes on (issue 33)",
            "the kept chapter still reaches the state",
        ),
    ] = True
    """Ask for the update past the turn cap when a kept chapter has none (fabula's; the reference has none)."""
    fallback_full_update: Annotated[bool, own("what the fallback update asks first (with `fallback_update`)")] = True
    """The fallback asks for the full update first, then one event if that fails; off: the one event only."""
    ask_again_looped_update: Annotated[
        bool, own("whether the LLM layer's second try of a looped reply applies to an update asked alone")
    ] = True
    """An update asked alone (the only tool left, or a fallback) whose reply loops is asked again once
    with a firmer penalty, as every looped structured reply is; off: it fails at once and the
    fallback (or the kept chapter) follows. Under the small profile that second try succeeded once
    in seven (docs/design/embedded-speed.md)."""
    failed_update_limit: Annotated[
        int,
        Source(
            "reference agent_core.py:3533 `LongStoryAgent._run_chapter_loop`, :4486 `_tool_narrative_ops_update`",
            "no such rule; a refused update may be sent again until the turn cap",
            "a 135M model re-sent one refused update 25 times, and let ten updates in a row run away, until its "
            "context was full (docs/design/small-model-loop.md)",
        ),
    ] = Field(3, ge=0, le=100)
    """Update attempts that fail in a row (refused, or a reply cut off or invalid while the update is
    on offer) end the chapter's turns: the fallback update is asked, then the chapter is kept
    (fabula's; 0: never, as the reference). A 135M model re-sent one refused update 25 times, and
    in another run let ten updates in a row run away, until its context was full."""
    state_style: Annotated[
        Literal["fabula", "reference"],
        Source(
            "reference agent_core.py:1625 `NARRATIVE_OPS_UPDATE_TOOL` (the mode nstagent.py:20 fixes), :3514, "
            ":2051 `StoryState.to_dict`",
            "a character entry is `{name, description}`, one description of the character's whole situation; the "
            "state is shown to the model as one indented JSON object with ids and chapter numbers",
            "typed character fields with identity facts (age, birth date, appearance, titles) keep them from "
            "drifting; headed sections read more easily to a small model",
        ),
    ] = "fabula"
    """How a character entry is asked for and the state shown: "fabula", typed fields with identity facts and
    headed sections; "reference", ``{name, description}`` and one JSON object (``NarrativeState.render``)."""
    retry_feedback: Annotated[
        Literal["fabula", "reference"],
        Source(
            "reference agent_core.py:2850-2964 `update_rejected_write_context`, :2966 `recent_failure_feedback`",
            "a rejected write is told its count, the target and range, how far to scale it, and whether the draft "
            "is still in the conversation; once a write is accepted the rejected draft left in full gives way to "
            "a placeholder",
            "the deviation in words and a plain longer/shorter read more easily to a small model; the last rejected "
            "draft stays as the chapter is finished",
        ),
    ] = "fabula"
    """What a rejected write is told and what happens to the rejected draft once one is accepted: "fabula",
    the gate's feedback; "reference", ``agent.nst.chapter.rejected.reference_feedback`` and the placeholder."""
    tool_protocol: Annotated[
        Literal["grammar", "native"],
        Source(
            "reference agent_core.py:1908 `chapter_tools`, :3533 `LongStoryAgent._run_chapter_loop`",
            'the API\'s own tool calls: `tools` with `tool_choice: "auto"`, replies with `tool_calls`, each '
            "result a `role: tool` message",
            "one grammar-constrained JSON object per turn needs no tool-call parser on the server and holds a "
            "small model to a legal call",
        ),
    ] = "grammar"
    """How a chapter turn's tool call travels: "grammar", one JSON object under the turn's grammar;
    "native", the server's own tool calls (it must be started for them: ``agent.llm.native_tools``)."""
    terminal_punctuation: Annotated[
        bool,
        Source(
            "reference agent_core.py:5210-5217 `_tool_write`",
            "a chapter whose last character (closing quotes and brackets aside) is not terminal punctuation is "
            "rejected as cut mid-sentence",
            "a draft cut at its token limit is already rejected; a stop mid-sentence with tokens to spare is rare",
        ),
    ] = False
    """Reject a draft that does not end on terminal punctuation (``agent.nst.chapter.drafter.ends_a_sentence``)."""
    atomic_update: Annotated[
        bool,
        Source(
            "NstAgent §4.3 Eq. 6; reference agent_core.py:560, :4486 `LongStoryAgent._tool_narrative_ops_update`",
            "all or nothing (one invalid entry and nothing applies), and the model may send the update again "
            "(the paper: update exactly once; the reference's prompt asks for one call, its tool takes more). "
            "fabula's paper profile: a refused update may be sent again, an applied one is final",
            "a refused entry leaves the rest applied, and one more update is offered for the refused entries",
        ),
    ] = False
    """All or nothing (paper Eq. 6): one refused entry refuses the update, and no second update is offered."""
    tool_max_tokens: Annotated[
        int,
        Source(
            *TURN_BUDGET,
            "a tool call's JSON is short: 512 tokens stop a runaway reply early",
        ),
    ] = Field(512, ge=16, le=TOKEN_CAP)
    update_max_tokens: Annotated[
        int,
        Source(
            *TURN_BUDGET,
            "an update is a few hundred tokens: 4,096 stop a runaway reply sooner",
        ),
    ] = Field(4096, ge=64, le=TOKEN_CAP)
    update_entry_limit: Annotated[
        int,
        own(
            "the most entries an update's grammar allows per array (characters, their facts, events, requirements, "
            "resolved keys; 0: no limit), so a small model's update cannot list one entry until its token limit"
        ),
    ] = Field(0, ge=0, le=100)
    """The grammar's ``maxItems`` for each array of an update (0: none), nested facts included."""
    min_past_events: Annotated[
        int, Source("NstAgent §4.3", "empty arrays are passed when a collection does not change")
    ] = Field(0, ge=0, le=10)
    """Past events every update must add (the grammar's minimum). The paper allows none when
    nothing changed; 1 may help a tiny model whose cheapest legal update is an empty one."""
    evidence: Annotated[
        bool,
        Source(
            "NstAgent §4.3; reference agent_core.py:1625 `NARRATIVE_OPS_UPDATE_TOOL`",
            "four arrays, no quotes",
            "each new entry quotes the chapter, and an entry whose quote is not there is refused: made-up entries "
            "stay out of the state",
        ),
    ] = True
    """Every new or changed state entry quotes the accepted chapter; an entry whose quote does not
    occur there is refused (the rest applies) and the model may retry the refused ones once."""
    arc_chapters: Annotated[
        int, own("chapters per arc when old past events are digested (only past `state_share`)")
    ] = Field(5, ge=1, le=100)
    """Chapters per arc: past events of old arcs are consolidated into one digest per arc when the
    budget is tight (the recent events stay verbatim; every event stays in the state)."""
    state_share: Annotated[
        float,
        Source(
            "NstAgent §4.2, App. F; reference agent_core.py:3514 `LongStoryAgent._build_chapter_prompt`",
            "the whole state, as JSON, in every chapter prompt; past events accumulate without eviction",
            "old arcs' events are digested once the state passes 25 % of the context, leaving room in small "
            "contexts (1.0: only when the request would not fit)",
        ),
    ] = Field(0.25, gt=0.0, le=1.0)
    """Largest share of the context the rendered state may take before older arcs are digested."""
    digest_max_tokens: Annotated[int, own("the budget of one arc digest (only when digests run)")] = Field(
        400, ge=32, le=TOKEN_CAP
    )

    @model_validator(mode="after")
    def _events_fit_the_entry_limit(self) -> Self:
        if 0 < self.update_entry_limit < self.min_past_events:
            raise ValueError(
                f"update_entry_limit={self.update_entry_limit} is under min_past_events={self.min_past_events}: "
                "no update could be valid"
            )
        return self


class RollSumConfig(Planned):
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {"small": StoryTarget.PROFILES["small"], "paper": PAPER_ROLLSUM}

    chapter_attempts: Annotated[
        int, Source("reference README.md:92 `--max-length-attempts 50`", "50 attempts per chapter")
    ] = Field(50, ge=1, le=100)
    """The reference code's 50 attempts per chapter."""
    summary_max_tokens: Annotated[
        int, Source("NstAgent App. A.1; reference README.md:89 `--summary-max-tokens 16384`", "16,384 per summary call")
    ] = Field(16384, ge=64, le=TOKEN_CAP)
    reference_prompts: Annotated[
        bool,
        Source(
            "reference rolling_summary.py:391 `summary_prompt`, :274 `chapter_prompt`, :81 `SYSTEM_PROMPTS`",
            "the chapter request: its own system line; the prompt, the whole outline as JSON, the summary, then "
            "the task (target and range, prose only, this chapter only, aim at the target); the summary call "
            "sees the story prompt and keeps what later chapters need, with no word limit (in fabula's words: "
            "`agent.nst.baselines.reference_prompts`)",
            "the summary keeps a list of facts (names, ages, dates, places) so that they do not drift",
        ),
    ] = False
    """RollSum's requests shaped as the reference's (``agent.nst.baselines.reference_prompts``). Off: fabula's
    (the summary keeps a list of facts: names, ages, dates, places, ...)."""


class DirectConfig(StoryTarget):
    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {"small": StoryTarget.PROFILES["small"], "paper": PAPER_DIRECT}

    attempts: Annotated[int, Source("reference direct.py:54 `DEFAULT_MAX_LENGTH_ATTEMPTS`", "10 attempts")] = Field(
        10, ge=1, le=100
    )
    """The reference code's 10 attempts."""
    min_tokens: Annotated[
        bool, Source("NstAgent App. A.1", "no floor; the paper measures how Direct reaches the length unaided")
    ] = False
    """No floor by default: the paper measures Direct's difficulty reaching the length unaided."""
    reference_prompts: Annotated[
        bool,
        Source(
            "reference direct.py:57 `SYSTEM_PROMPTS`, :70 `direct_prompt`",
            "its own system line; the prompt, then the output rules with the target and range last: prose only, "
            "about the last 10 % for the resolution, stop right after the last sentence (in fabula's words: "
            "`agent.nst.baselines.reference_prompts`)",
            "a short request: a local model reads fewer instructions more reliably",
        ),
    ] = False
    """Direct's request shaped as the reference's (``agent.nst.baselines.reference_prompts``)."""


NST_DEFAULTS: dict[str, Any] = NstConfig.defaults()
ROLLSUM_DEFAULTS: dict[str, Any] = RollSumConfig.defaults()
DIRECT_DEFAULTS: dict[str, Any] = DirectConfig.defaults()
