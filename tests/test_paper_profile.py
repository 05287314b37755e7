"""The ``paper`` profile: every constant pinned to the paper section or reference line it comes from,
and scripted runs whose ledgers show none of fabula's additions ran (issue #28, items 1-2).

Citations: "NstAgent" is /work/shared/seeds/nstagent-narrative-state-tracking.md (the paper, with
its seed-file line); "Magnet" is magnet-personas-to-plot.md; "reference" is the public repository
zhennan1/NstAgent at commit e05b9b3 (``code/agent/agent_core.py``, ``code/agent/generation_common.py``,
``code/baselines/rolling_summary.py``, ``code/baselines/direct.py``); line numbers are of that commit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent import pipelines
from agent.magnet import ending
from agent.magnet.prompts import SELECT_ONLY_SYSTEM, SELECT_SYSTEM
from agent.magnet.settings import REASONING_TOKENS, MagnetConfig, MagnetSettings, SingleConfig
from agent.nst.baselines import reference_prompts
from agent.nst.chapter.restarts import ChapterFailedError
from agent.nst.chapter.tools import ChapterSession, ToolError, update_grammar
from agent.nst.chapter.update import update_state
from agent.nst.config import DirectConfig, NstConfig, RollSumConfig
from agent.nst.plan.frozen import stages_of
from agent.nst.plan.planner import ANCHORS, Stages, _stage_prompt
from agent.nst.state import NarrativeState
from agent.settings import parse_assignments
from agent.store import RunStore
from agent.testing.author import Author, chapter_of, default_policy, outline_asked
from agent.testing.story_llm import StoryLLM, default_critic
from tests.magnet.stories import story

PROMPT = {"prompt": "A keeper finds a bell in the harbour.", "prompt_id": None}


def paper(cls: type, **over: Any) -> Any:
    return cls.parse({**PROMPT, "words": 3000, **cls.profile_settings("paper"), **over})


# -- NstAgent: each constant and where it comes from ----------------------------------------------

NST_PINS = [
    # reference README.md:75-76, the published command: --max-tokens 32768 is every chapter call's ceiling,
    # the prose, each tool turn and each update alike ...
    ("prose_max_tokens", 32768),
    ("tool_max_tokens", 32768),
    ("update_max_tokens", 32768),
    # ... under which --chapter-token-control dynamic --dynamic-token-overhead 1536 sizes each call
    ("turn_token_overhead", 1536),
    ("planner_max_tokens", 32768),  # README.md:68: build_outline_cache.py --max-tokens 32768
    ("outline_attempts", 5),  # reference agent_core.py:59 MAX_JSON_RETRIES = 5
    ("chapter_restarts", 3),  # README.md:78 --auto-resumes 3: a failed chapter resumes from its checkpoint
    ("terminal_punctuation", True),  # reference agent_core.py:5210-5217: a draft ending mid-sentence is rejected
    ("state_style", "reference"),  # reference agent_core.py:1625 NARRATIVE_OPS_UPDATE_TOOL, :3514 the state as JSON
    ("retry_feedback", "reference"),  # reference agent_core.py:2850-3090: the retry feedback and the placeholder
    ("temperature", 0.7),  # reference agent_core.py:50 DEFAULT_TEMPERATURE; NstAgent App. A.1 (seed line 395)
    ("read_budget", 3),  # reference agent_core.py:53 MAX_READ
    ("search_budget", 5),  # reference agent_core.py:54 MAX_SEARCH
    ("search_hits", 8),  # reference agent_core.py:55 SEARCH_MAX_HITS
    # reference agent_core.py:947-1128 ChapterSearchIndex: one unicode61 column, the centre's tokens 3x (1034),
    # query tokens under 2 characters dropped (1019), ties toward later chapters (1112), JSON hits (1119, 4033)
    ("search_style", "reference"),
    ("correct_budget", 3),  # reference agent_core.py:56 MAX_CORRECT_PER_CHAPTER
    ("max_turns", 50),  # reference agent_core.py:58 MAX_TURNS_PER_CHAPTER; App. A.1 "capped at 50 turns"
    ("gate_low", 0.8),
    ("gate_high", 1.2),  # reference generation_common.py:23 WORD_COUNT_TOLERANCE = 0.20; §5.1
    # App. A.1 (seed line 401): replies at the token limit are rejected; no floor is ever asked for
    ("min_tokens", False),
    ("trim_cut_drafts", False),  # same line: "A response that stops at the output-token limit is never accepted"
    ("evidence", False),  # §4.3 Eq. 6: the update is four arrays; no quote is asked for or checked
    ("atomic_update", True),  # §4.3 "applies them atomically"; "calls update exactly once"
    ("min_past_events", 0),  # §4.3 "Empty arrays are passed when a collection does not change"
    ("fallback_update", False),  # App. A.1: the loop "ends when the model outputs DONE"; no update past the cap
    ("required_after_failures", False),  # reference: no failed-call rule (agent_core.py section 6 tool loop)
    ("failed_update_limit", 0),  # reference: a failing update is asked again until the turn cap
    ("state_share", 1.0),  # §4.3 "each chapter prompt contains the outline and the state": the state whole
    ("repetition_guard", False),  # neither paper nor reference has a repetition guard
    # reference agent_core.py stage_count_for_words: 1 stage < 10K, 2 < 20K, 3 < 100K, else 4
    ("premise_from", 10_000),
    ("synopsis_from", 20_000),
    ("acts_from", 100_000),
    ("synopsis_words", True),  # reference OutlineAgent.generate: detail_words = 1000 if stages == 3 else 2500
    ("free_outline", True),  # reference outline_chapters_prompt: "approximately", "up to you", key chapters more
    # reference recommend_chapter_count (ceil), outline_chapters_prompt (array from 0, no title),
    # _chat_json (a free reply, re-asked with the error)
    ("outline_style", "reference"),
]


@pytest.mark.parametrize(("key", "value"), NST_PINS, ids=[k for k, _ in NST_PINS])
def test_nst_paper_constant(key: str, value: Any) -> None:
    assert getattr(paper(NstConfig), key) == value


@pytest.mark.parametrize(
    ("cls", "key", "value"),
    [
        # App. A.1 (seed 401): "a 32,768-token limit per chapter call" (the paper over the reference's
        # rolling_summary.py DEFAULT_MAX_TOKENS = 16384: where the paper speaks, it decides)
        (RollSumConfig, "prose_max_tokens", 32768),
        (RollSumConfig, "reference_prompts", True),  # reference rolling_summary.py summary_prompt, chapter_prompt
        (RollSumConfig, "summary_max_tokens", 16384),  # same: "each summary call has a 16,384-token output limit"
        (RollSumConfig, "chapter_attempts", 50),  # reference rolling_summary.py DEFAULT_MAX_LENGTH_ATTEMPTS = 50
        (RollSumConfig, "min_tokens", False),
        (RollSumConfig, "planner_max_tokens", 32768),
        (RollSumConfig, "turn_token_overhead", 1536),  # README.md:90-91: --token-control dynamic, overhead 1536
        (RollSumConfig, "acts_from", 100_000),  # RollSum "reads the same frozen outline" (§5.1, seed 195)
        (RollSumConfig, "outline_style", "reference"),  # the same frozen outline (build_outline_cache.py)
        # App. A.1: "one full-story call ... 32,768-token output limit"; reference direct.py DEFAULT_MAX_TOKENS = 32768
        (DirectConfig, "prose_max_tokens", 32768),
        (DirectConfig, "attempts", 10),  # reference code/baselines/direct.py DEFAULT_MAX_LENGTH_ATTEMPTS = 10
        (DirectConfig, "chapter_restarts", 0),  # reference direct.py:374: a failed story is recorded, not resumed
        (RollSumConfig, "chapter_restarts", 3),  # README.md:92 --auto-resumes 3
        (DirectConfig, "min_tokens", False),
        (DirectConfig, "reference_prompts", True),  # reference direct.py direct_prompt (in fabula's words)
        (DirectConfig, "repetition_guard", False),
    ],
)
def test_baseline_paper_constant(cls: type, key: str, value: Any) -> None:
    assert getattr(paper(cls), key) == value


def test_chapter_anchors_are_the_papers() -> None:
    """App. A.1 (seed 395) and reference agent_core.py CHAPTER_ANCHORS: 10/15/25/40 at 10K/20K/50K/100K."""
    assert ANCHORS == ((10_000, 10), (20_000, 15), (50_000, 25), (100_000, 40))


@pytest.mark.parametrize(
    ("words", "stages", "synopsis"),
    [
        (9_999, ["outline"], None),
        (10_000, ["premise", "outline"], None),
        (19_999, ["premise", "outline"], None),
        (20_000, ["premise", "synopsis", "outline"], 1000),
        (99_999, ["premise", "synopsis", "outline"], 1000),
        (100_000, ["premise", "synopsis", "acts", "outline"], 2500),
    ],
)
def test_reference_planner_stages(words: int, stages: list[str], synopsis: int | None) -> None:
    """Reference agent_core.py ``stage_count_for_words`` and ``OutlineAgent.generate``."""
    shape = stages_of(paper(NstConfig, words=words))
    assert shape.for_words(words) == stages and shape.synopsis_target(words) == synopsis
    if synopsis:
        assert f"synopsis of about {synopsis} words" in _stage_prompt("synopsis", "p", "x", words, 30, shape)


def test_default_planner_unchanged() -> None:
    """The default profile keeps fabula's schedule (premise from 3K, acts from 40K, no synopsis target)."""
    shape = stages_of(NstConfig.parse({**PROMPT, "words": 3000}))
    assert shape == Stages() and shape.for_words(40_000) == ["premise", "synopsis", "acts", "outline"]
    assert "synopsis of about" not in _stage_prompt("synopsis", "p", "x", 40_000, 30, shape)


def test_default_and_small_keep_fabulas_search() -> None:
    assert NstConfig.parse({**PROMPT, "words": 3000}).search_style == "fabula"
    assert NstConfig.parse({**PROMPT, "words": 3000, **NstConfig.profile_settings("small")}).search_style == "fabula"


def test_free_outline_prompt_is_the_references() -> None:
    """Reference ``outline_chapters_prompt``: about N chapters, adjustable; more words for key chapters.
    Fabula's own outline with ``free_outline`` (``outline_style`` "fabula") says so in its words; the paper's
    asks for the reference's array (tests/nst/test_plan_reference.py)."""
    text = _stage_prompt("outline", "p", "x", 20_000, 15, Stages(free_outline=True))
    assert "approximately 15" in text and "may adjust" in text and "important chapters" in text
    assert "exactly" not in text
    paper_text = _stage_prompt("outline", "p", "x", 20_000, 15, stages_of(paper(NstConfig, words=20_000)))
    assert "about 15 chapters" in paper_text and "key chapters may have more words" in paper_text
    assert "exactly" not in paper_text


def test_atomic_update_applies_nothing_and_offers_no_second_call() -> None:
    """Eq. 6: all or nothing. One refused entry (a character twice in one update) refuses the whole
    update, and no second update is offered; the default applies the rest and offers one retry."""
    config = paper(NstConfig)
    session = ChapterSession.for_config(1, config.gate(1000), config, ())
    session.accepted_text = "Ann rang the bell."
    snap = {
        "name": "Ann",
        "location": "pier",
        "goal": "g",
        "relationships": "r",
        "knowledge": "k",
        "possessions": "p",
        "condition": "c",
        "facts": [],
    }
    grammar = update_grammar((), 0, session.evidence)
    assert '"evidence"' not in json.dumps(grammar.model_json_schema())  # §4.3: four arrays, no quotes
    call = grammar.model_validate(
        {
            "tool": "update",
            "upsert_character_state": [snap, snap],
            "add_past_event": [{"key": "bell_rung", "description": "Ann rang the bell."}],
            "add_future_requirement": [],
            "resolve_future_requirement": [],
        }
    )
    with pytest.raises(ToolError, match="nothing was applied"):
        update_state(session, NarrativeState(), call, evidence=config.evidence, atomic=config.atomic_update)
    assert not session.updated and not session.retry_update
    applied, _ = update_state(session, NarrativeState(), call, evidence=False, atomic=False)  # the default: per entry
    assert list(applied.state.past_events) == ["bell_rung"] and session.retry_update


def test_paper_keeps_every_tool_on_offer_after_failures() -> None:
    config = paper(NstConfig)
    session = ChapterSession.for_config(1, config.gate(1000), config, ())
    session.failed = 20
    assert session.may_explore()
    default = NstConfig.parse({**PROMPT, "words": 3000})
    fabula = ChapterSession.for_config(1, default.gate(1000), default, ())
    fabula.failed = 20
    assert not fabula.may_explore()  # the default's rule: required steps only after 5 failed calls


# -- Magnet and the single-model baseline ------------------------------------------------------------

MAGNET_PINS = [
    ("critic_temperature", 0.1),
    ("narrator_temperature", 0.35),
    ("goal_temperature", 0.1),
    ("character_temperature", 0.2),
    ("baseline_temperature", 0.35),  # Magnet App. A.1 (seed line 170)
    ("stall_steps", 15),
    ("shift_every", 40),  # Magnet §3 (seed line 53): 15 stalled steps, a shift every 40
    ("recall_paragraphs", 0),
    ("recap_every", 0),  # §3 (seed 57, 61): roles see "recent story history" only
    ("narrator_rejects_updates", False),  # §3 (seed 61): the narrator "selectively chooses actions"
    ("narrator_calls", 1),  # §3.2 (seed 61): the narrator chooses the actions and writes the prose in one call
    ("goal_calls", 1),  # §3.2 (seed 63): the goal generator writes the transition with the new goal
    ("paragraph_floor", False),
    ("repetition_guard", False),  # neither is in the paper
    ("critic_example", False),  # the paper's critic prompt has no example reply
    # §3.2 (seed 57-63): API models with no stated limit, the critic a thinking model (Gemini 2.5 Flash): every call
    # gets 32,768 tokens of room to reason (Qwen3's recommended output length) on top of its answer's size ...
    ("reasoning_tokens", 32768),
    ("paragraph_tokens", 320),  # ... which stays what it was (a closing paragraph is sized from it)
    ("paragraph_min_tokens", 60),
]


@pytest.mark.parametrize(("key", "value"), MAGNET_PINS, ids=[k for k, _ in MAGNET_PINS])
def test_magnet_paper_constant(key: str, value: Any) -> None:
    assert getattr(MagnetSettings.parse(MagnetSettings.profile_settings("paper")), key) == value


def test_single_baseline_paper_settings() -> None:
    config = SingleConfig.parse({"story": story(words=600).to_dict(), **SingleConfig.profile_settings("paper")})
    assert not config.paragraph_floor and not config.repetition_guard and config.baseline_temperature == 0.35


def test_paper_profile_is_a_bundle_of_settings() -> None:
    """Each part stays a setting of its own: ``--set`` turns any one back."""
    over = parse_assignments(["fallback_update=true"])
    config = NstConfig.parse({**PROMPT, "words": 3000, **NstConfig.profile_settings("paper"), **over})
    assert config.profile == "paper" and config.fallback_update and not config.min_tokens
    assert MagnetConfig.profile_settings("paper")["profile"] == "paper"


# -- scripted runs: the ledger shows what was sent ---------------------------------------------------


def _run(tmp_path: Path, name: str, config: dict[str, Any], model: Any) -> Any:
    llm = pipelines.LLMOptions(backend="scripted", model="scripted")
    return pipelines.start(tmp_path / name, name, config, llm, model=model)


def _nst(tmp_path: Path, profile: str, name: str = "nst") -> Any:
    settings = NstConfig.profile_settings(profile)
    config = {**PROMPT, "words": 3000, "plan_cache": str(tmp_path / "plans" / profile), **settings}
    return _run(tmp_path / profile, name, config, Author())


def test_nst_paper_run_ledger(tmp_path: Path) -> None:
    store = _nst(tmp_path, "paper")
    assert store.info().status == "completed"
    calls, tools = store.ledger.llm_calls(), store.ledger.tool_calls()
    assert calls and all(c.min_tokens is None for c in calls)  # no floor on any call
    # README.md:75-76: every chapter call gets min(32768, max(1024, ceil(1.35 x 1000 + 1536))) = 2886 tokens
    assert not [c for c in calls if c.role == "nst_prose"]  # the prose travels inside write
    assert {c.max_tokens for c in calls if c.role == "nst_turn"} == {2886}  # every turn alike
    assert [c.role for c in calls if c.role and c.role.startswith("plan_")] == ["plan_outline"]  # 3K: outline only
    assert not any(c.arguments.get("fallback") for c in tools)  # no update past the turn cap
    assert not any("repetition" in c.arguments for c in tools)  # the guard never judged a draft
    updates = [c for c in tools if c.tool == "update"]
    assert updates and all(json.loads(c.result or "{}")["ok"] for c in updates)
    assert len(updates) == len({c.unit for c in updates})  # one update per chapter
    system = next(m["content"] for c in calls if c.role == "nst_turn" for m in c.messages if m["role"] == "system")
    assert "evidence" not in system and len(system) < 400  # two sentences; the rules live in the chapter prompt


def test_nst_default_run_sends_the_floor(tmp_path: Path) -> None:
    """The check above is not vacuous: the default profile's ledger shows its floor and gate-sized ceiling."""
    calls = _nst(tmp_path, "default").ledger.llm_calls()
    prose = [c for c in calls if c.role == "nst_prose"]
    assert prose and all(c.min_tokens for c in prose) and all(c.max_tokens < 16384 for c in prose)


@pytest.mark.parametrize("name", ["rollsum", "direct"])
def test_baseline_paper_runs_send_no_floor(tmp_path: Path, name: str) -> None:
    cls = RollSumConfig if name == "rollsum" else DirectConfig
    config = {
        **PROMPT,
        "words": 3000,
        **cls.profile_settings("paper"),
        **({"plan_cache": str(tmp_path / "plans")} if name == "rollsum" else {}),
    }
    calls = _run(tmp_path, name, config, Author()).ledger.llm_calls()
    role = "rollsum_chapter" if name == "rollsum" else "direct_story"
    assert all(c.min_tokens is None for c in calls)
    # RollSum: the reference's dynamic budget (README.md:90-91), 2886 for a 1,000-word chapter; Direct: 32,768
    assert {c.max_tokens for c in calls if c.role == role} == ({2886} if name == "rollsum" else {32768})


def _magnet(tmp_path: Path, profile: str, name: str = "magnet") -> Any:
    cls = MagnetConfig if name == "magnet" else SingleConfig
    config = {"story": story(words=600).to_dict(), **cls.profile_settings(profile)}
    return _run(tmp_path / profile, name, config, StoryLLM())


def test_magnet_paper_run_ledger(tmp_path: Path) -> None:
    store = _magnet(tmp_path, "paper")
    assert store.info().status == "completed"
    calls = store.ledger.llm_calls()
    assert calls and all(c.min_tokens is None for c in calls)  # no 60-token narrator floor
    assert not [c for c in calls if c.role == "recap"]  # no recap every 8 steps
    texts = [m["content"] for c in calls for m in c.messages]
    assert not any("Earlier passages" in t or "Recalled" in t for t in texts)  # no BM25 recall
    assert not [c for c in calls if c.role in ("narrator-select", "transition")]  # one call each (§3.2)
    narrations = [c for c in calls if c.role == "narrator"]
    assert narrations and all(c.schema_name for c in narrations)  # selection and paragraph in one JSON reply
    assert not any("must be rejected" in c.messages[1]["content"] for c in narrations)
    assert not any("rejected_updates" in (c.text or "") for c in narrations)


def test_magnet_paper_selection_only_without_vetting(tmp_path: Path) -> None:
    """With two narrator calls (``--set narrator_calls=2``) the paper's narrator still only selects and orders."""
    config = {"story": story(words=600).to_dict(), **MagnetConfig.profile_settings("paper"), "narrator_calls": 2}
    calls = _run(tmp_path, "magnet", config, StoryLLM()).ledger.llm_calls()
    selects = [c for c in calls if c.role == "narrator-select"]
    assert selects and all(c.messages[1]["content"].startswith(SELECT_ONLY_SYSTEM + "\n\n") for c in selects)
    assert not any("must be rejected" in c.messages[1]["content"] for c in selects)


def test_magnet_default_run_has_the_additions(tmp_path: Path) -> None:
    """Not vacuous: the default profile's ledger shows the recap, the floor and the vetting narrator."""
    calls = _magnet(tmp_path, "default").ledger.llm_calls()
    assert [c for c in calls if c.role == "recap"] and any(c.min_tokens for c in calls if c.role == "narrator")
    selects = [c for c in calls if c.role == "narrator-select"]
    assert any(c.messages[1]["content"].startswith(SELECT_SYSTEM + "\n\n") for c in selects)


ANSWERS = {"character": 160, "critic": 400, "narrator": 80 + 320, "goal": 120 + 220}
"""Each role's answer under ``paper`` (one narrator call, one goal call), the sizes the default asks for."""


def concludes_at_once(request: Any, n: int) -> dict[str, Any]:
    """Every action completes the goal: the concluding goal is reached as soon as it is set."""
    return {**default_critic(request, n), "goal_reached": True}


@pytest.mark.parametrize("narrator_calls", [1, 2])
def test_magnet_paper_ceilings_leave_room_to_reason(tmp_path: Path, narrator_calls: int) -> None:
    """Issue 33 item 5: every role's ``max_tokens`` under ``paper`` is its answer's size plus 32,768 tokens for a
    thinking model's reasoning, while the closing paragraph stays sized to the words left (its floor, with
    ``paragraph_floor`` on, and its answer, three paragraphs at most), never to the ceiling. A wide ending window
    and a critic that reaches every goal close a 1,000-word story with about 900 words missing."""
    over = {"ending_paragraphs": 40}
    if narrator_calls == 2:
        over.update(narrator_calls=2, paragraph_floor=True)
    config = {"story": story(words=1000).to_dict(), **MagnetConfig.profile_settings("paper"), **over}
    store = _run(tmp_path, "magnet", config, StoryLLM(critic=concludes_at_once))
    assert store.info().status == "completed"
    settings = MagnetConfig.parse(config)
    last = store.info().last_unit
    assert store.steps()[-1]["record"]["final_paragraph"] and last > 2
    calls = store.ledger.llm_calls()
    closing = [i for i, c in enumerate(calls) if c.role == "narrator"][-1:]  # the last step's paragraph
    low, high = ending.final_budget(settings.story, settings, store.state(last - 1))
    left = settings.story.target_words - store.state(last - 1)["words"]
    assert left * 1.35 > 900 and (low, high) == (900, 960)  # the words left, bounded at three paragraphs
    answers = {**ANSWERS, "narrator-select": 80, "narrator": 320} if narrator_calls == 2 else ANSWERS
    for i, call in enumerate(calls):
        closes = i in closing
        answer = (high + (80 if narrator_calls == 1 else 0)) if closes else answers[call.role or ""]
        floor = (low if closes else 60) if call.role == "narrator" and narrator_calls == 2 else None
        assert (call.max_tokens, call.min_tokens) == (answer + REASONING_TOKENS, floor), (i, call.role)
    assert {c.role for c in calls} == set(answers)


def test_the_closing_paragraph_is_sized_by_the_answer_not_the_ceiling() -> None:
    """With 20,000 words missing, ``paper`` closes in the three paragraphs' budget the default has: no 20,000-word
    floor and no closing answer grown from the reasoning room."""
    paper = MagnetSettings.parse(
        {**MagnetSettings.profile_settings("paper"), "narrator_calls": 2, "paragraph_floor": True}
    )
    state = {"words": 0}
    big = story(words=20000)
    assert ending.final_budget(big, paper, state) == ending.final_budget(big, MagnetSettings(), state) == (900, 960)
    assert paper.ceiling(960) == 960 + 32768 and MagnetSettings().ceiling(960) == 960


def test_magnet_default_run_asks_for_the_answers_alone(tmp_path: Path) -> None:
    """Not vacuous: the default profile's ceilings are the answer sizes, with no room for reasoning."""
    calls = _magnet(tmp_path, "default").ledger.llm_calls()
    sizes: dict[str, set[int]] = {}
    for call in calls:
        sizes.setdefault(call.role or "", set()).add(call.max_tokens)
    assert {
        role: sizes[role] for role in ("character", "critic", "narrator-select", "goal", "transition", "recap")
    } == {
        "character": {160},
        "critic": {400},
        "narrator-select": {80},
        "goal": {120},
        "transition": {220},
        "recap": {220},
    }
    assert 320 in sizes["narrator"] and max(sizes["narrator"]) <= 3 * 320


def test_single_paper_paragraphs_leave_room_to_reason(tmp_path: Path) -> None:
    """The baseline under ``paper`` continued paragraph by paragraph (``single_prompt`` off) leaves the same room;
    its one-prompt story keeps ``single_max_tokens`` (32,768, reasoning and story together)."""
    config = {"story": story(words=600).to_dict(), **SingleConfig.profile_settings("paper"), "single_prompt": False}
    calls = _run(tmp_path, "single", config, StoryLLM()).ledger.llm_calls()
    sizes = [c.max_tokens - REASONING_TOKENS for c in calls]
    assert calls and sizes[:-1] == [320] * (len(calls) - 1) and 320 <= sizes[-1] <= 960


def test_single_paper_run_sends_no_floor(tmp_path: Path) -> None:
    calls = _magnet(tmp_path, "paper", "single").ledger.llm_calls()
    assert calls and all(c.min_tokens is None for c in calls)


def stubborn(request: Any, tools: list[str]) -> str:
    """Writes every chapter, but never updates chapter 2: each of its later turns is invalid."""
    if "write" not in tools and tools and chapter_of(request) == 2:
        return '{"tool": "nothing"}'
    return default_policy(request, tools)


def _stubborn_run(tmp_path: Path, profile: str, **settings: Any) -> Any:
    config = {
        **PROMPT,
        "words": 3000,
        "plan_cache": str(tmp_path / "plans" / profile),
        "max_turns": 12,
        **NstConfig.profile_settings(profile),
        **settings,
    }
    return _run(tmp_path / f"{profile}{len(settings)}", "nst", config, Author(policy=stubborn))


def test_paper_has_no_fallback_update_and_no_required_only_rule(tmp_path: Path) -> None:
    """Past the turn cap the paper's loop asks for nothing more (the chapter fails: with no restart left the
    run fails, nothing of the chapter kept); and after five failed calls every tool is still on offer (the
    paper's settings on the grammar protocol; the native protocol offers every tool every turn anyway)."""
    with pytest.raises(ChapterFailedError, match="chapter 2 failed 1 time"):
        _stubborn_run(tmp_path, "paper", chapter_restarts=0, tool_protocol="grammar")
    with RunStore.open(tmp_path / "paper2" / "nst", readonly=True) as store:
        tools = [c for c in store.ledger.tool_calls() if c.unit == 2]
        assert [c.index for c in store.chapters()] == [1]
    assert not any(c.arguments.get("fallback") for c in tools)
    offered = [c.arguments["offered"] for c in tools if c.tool == "invalid"]
    # (the last turns offer only the required step whatever the profile: the cap's own rule, legal_tools)
    assert len(offered) > 7 and all("search" in o and "read" in o for o in offered[5:-2])
    # the default's additions, for contrast: three failed turns in a row end the chapter's turns, then
    # the fallback update; without that rule, after five failed calls only the required step is offered
    default = [c for c in _stubborn_run(tmp_path, "default").ledger.tool_calls() if c.unit == 2]
    assert any(c.arguments.get("fallback") for c in default)
    assert len([c for c in default if c.tool == "invalid" and not c.arguments.get("fallback")]) == 3
    patient = [c for c in _stubborn_run(tmp_path, "default", failed_update_limit=0).ledger.tool_calls() if c.unit == 2]
    assert [c.arguments["offered"] for c in patient if c.tool == "invalid" and not c.arguments.get("fallback")][-1] == [
        "update"
    ]


def test_the_cli_paper_profile_reaches_the_stored_config(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    """``fabula write nst --profile paper`` stores the bundle; ``fabula show`` names it."""
    from agent.cli import main

    author = Author()
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: author)
    run = tmp_path / "run"
    assert (
        main(
            [
                "write",
                "nst",
                "--prompt",
                "A keeper finds a bell.",
                "--words",
                "2000",
                "--profile",
                "paper",
                "--plan-cache",
                str(tmp_path / "plans"),
                "--out",
                str(run),
            ]
        )
        == 0
    )
    with RunStore.open(run, readonly=True) as store:
        config = store.info().config
        assert all(c.min_tokens is None for c in store.ledger.llm_calls())
    assert config["profile"] == "paper" and config["atomic_update"] and config["prose_max_tokens"] == 32768
    assert main(["show", str(run)]) == 0
    assert "profile paper" in capsys.readouterr().out


def test_paper_outline_is_free_and_gets_the_planner_ceiling(tmp_path: Path) -> None:
    """Reference: every planner stage asks for the published command's 32,768 tokens (README.md:68), and the
    outline leaves the count and the targets to the planner, under no grammar (``outline_chapters_prompt``,
    ``llm_call_text``)."""
    author = Author()
    _run(
        tmp_path,
        "nst",
        {**PROMPT, "words": 3000, "plan_cache": str(tmp_path / "plans"), **NstConfig.profile_settings("paper")},
        author,
    )
    (outline,) = [r for r in author.requests if r.role == "plan_outline"]
    assert outline.max_tokens == 32768
    assert outline.constraint is None  # the reference decodes the outline free (llm_call_text), no grammar


def test_single_paper_run_is_one_prompt(tmp_path: Path) -> None:
    """Magnet §4.2: the baseline generates the story from one prompt (no paragraph loop, no memory)."""
    store = _magnet(tmp_path, "paper", "single")
    calls = store.ledger.llm_calls()
    assert [c.role for c in calls] == ["baseline"] and calls[0].max_tokens == 32768
    assert "Write the whole story, about 600 words long." in calls[0].messages[1]["content"]
    assert store.info().status == "completed" and store.paragraphs()


def test_rollsum_paper_requests_have_the_references_shape(tmp_path: Path) -> None:
    """Reference code/baselines/rolling_summary.py: the chapter request has its own system line and the
    prompt, the whole outline as JSON, the summary, then the task with the ±20 % range; ``summary_prompt``
    shows the story prompt first and leaves the length to the model (fabula's words, not the reference's)."""
    author = Author()
    config = {**PROMPT, "words": 3000, "plan_cache": str(tmp_path / "plans"), **RollSumConfig.profile_settings("paper")}
    store = _run(tmp_path, "rollsum", config, author)
    summary = next(r for r in author.requests if r.role == "rollsum_summary").messages
    assert summary[0]["content"] == reference_prompts.SUMMARY_SYSTEM
    assert (
        summary[1]["content"].startswith(f"Story prompt:\n{PROMPT['prompt']}")
        and "Keep every" not in summary[1]["content"]
    )
    system, user = (m["content"] for m in next(r for r in author.requests if r.role == "rollsum_chapter").messages)
    assert system == reference_prompts.CHAPTER_SYSTEM
    headings = [line for line in user.splitlines() if line.startswith("# ")]
    assert headings == [
        "# Story prompt",
        "# The whole outline (frozen)",
        "# The story so far, summarized",
        "# Current task",
    ]
    whole = user.split("# The whole outline (frozen)\n")[1].split("\n\n# ")[0]
    assert json.loads(whole) == store.plans.all()["outline"]  # the whole outline, as JSON
    assert "±20 %" in user.split("# Current task")[1] and "Completed chapters" not in user


def test_direct_paper_request_has_the_references_shape(tmp_path: Path) -> None:
    """Reference code/baselines/direct.py ``direct_prompt``: its own system line, the prompt, then the output
    rules with the target and range last (fabula's words)."""
    author = Author()
    _run(tmp_path, "direct", {**PROMPT, "words": 3000, **DirectConfig.profile_settings("paper")}, author)
    system, user = (m["content"] for m in next(r for r in author.requests if r.role == "direct_story").messages)
    assert system == reference_prompts.DIRECT_SYSTEM and user.startswith(f"Story prompt:\n{PROMPT['prompt']}")
    assert "target 3000 words, accepted range 2400-3600" in user.rsplit("\n", 1)[1]  # nearest the reply


class Planner(Author):
    """Plans one chapter more than recommended, the key chapter twice as long as the others."""

    def reply(self, request: Any) -> tuple[str, str]:
        if request.role != "plan_outline":
            return super().reply(request)
        n = outline_asked(request)[0] + 1
        share = 3000 // (n + 1)
        targets = [share] * n
        targets[-2] = 2 * share  # the climax
        # the reference's shape (outline_style "reference"): an array from 0, no book title
        chapters = [
            {"id": i, "name": f"Part {i}", "description": "Things happen.", "word_count": t}
            for i, t in enumerate(targets)
        ]
        return json.dumps(chapters), "stop"


def test_paper_outline_may_change_the_count_and_give_key_chapters_more(tmp_path: Path) -> None:
    """§4.1 / App. A.1 and reference ``outline_chapters_prompt``: the count is adjustable and the
    planner sizes each chapter; each chapter still passes the ±20 % gate around its own target."""
    store = _run(
        tmp_path,
        "nst",
        {**PROMPT, "words": 3000, "plan_cache": str(tmp_path / "plans"), **NstConfig.profile_settings("paper")},
        Planner(),
    )
    assert store.info().status == "completed"
    targets = [c["target_words"] for c in store.plans.all()["outline"]]
    assert len(targets) == 4 and targets[2] == 2 * targets[0] and len(store.chapters()) == 4


def test_the_cli_paper_profile_of_the_single_baseline(tmp_path: Path, monkeypatch: Any) -> None:
    """``fabula write single --profile paper`` gets the baseline's own bundle (one prompt), not Magnet's."""
    from agent.cli import main
    from agent.store import RunStore

    llm = StoryLLM()
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: llm)
    run = tmp_path / "run"
    assert (
        main(
            [
                "write",
                "single",
                "--story",
                "agent/magnet/examples/mystery_codicil.toml",
                "--words",
                "150",
                "--profile",
                "paper",
                "--out",
                str(run),
            ]
        )
        == 0
    )
    with RunStore.open(run, readonly=True) as store:
        assert store.info().config["single_prompt"] and [c.role for c in store.ledger.llm_calls()] == ["baseline"]


def reaches_every_goal(request: Any, n: int) -> dict[str, Any]:
    """Every action completes the goal: a goal call follows every step."""
    return {**default_critic(request, n), "goal_reached": True}


PARAGRAPH_TEXT = "Rain fell on the old house"
"""How every scripted paragraph begins (``default_paragraph``)."""


def _role_texts(calls: list[Any], role: str) -> list[str]:
    return ["\n\n".join(m["content"] for m in c.messages) for c in calls if c.role == role]


def test_magnet_paper_roles_get_the_inputs_section_3_2_lists(tmp_path: Path) -> None:
    """Issue 33 item 5 (``role_inputs``): the critic gets the action, the character's persona, the goal and the
    world state, never the story's paragraphs or another persona; the narrator the actions, the world state, the
    goal and the paragraphs, no persona; the goal generator every prior goal; the character agent its persona,
    the goal, the paragraphs and its view of the world."""
    config = {"story": story(words=1000).to_dict(), **MagnetConfig.profile_settings("paper")}
    store = _run(tmp_path, "magnet", config, StoryLLM(critic=reaches_every_goal))
    assert store.info().status == "completed"
    calls = store.ledger.llm_calls()
    characters, critics = _role_texts(calls, "character"), _role_texts(calls, "critic")
    narrators, goals = _role_texts(calls, "narrator"), _role_texts(calls, "goal")
    assert any(PARAGRAPH_TEXT in t for t in characters)  # the story had paragraphs while the critic judged
    assert critics and not any(PARAGRAPH_TEXT in t or "Story so far" in t or "Characters:" in t for t in critics)
    for call in (c for c in calls if c.role == "critic"):
        text = call.messages[1]["content"]
        name = text.split("Proposed action of ")[1].split(":")[0]
        assert f"Name: {name}\n" in text and text.count("Name: ") == 1  # its own persona, no other
        assert "World state" in call.messages[0]["content"] and "Current story goal: " in call.messages[0]["content"]
    assert any(PARAGRAPH_TEXT in t for t in narrators) and not any("Characters:" in t for t in narrators)
    assert all("World state" in t and "Proposed actions:" in t for t in narrators)
    assert len(goals) >= 2
    made = [story(words=1000).goal]
    for text in goals:  # every goal set so far, the previous one included
        assert all(f"- {g}" in text for g in made), (made, text)
        made.append(f"New goal number {len(made)}.")  # default_goal counts from 1


def test_magnet_default_critic_and_narrator_share_the_scene(tmp_path: Path) -> None:
    """Not vacuous: by default the critic and the narrator see the recent paragraphs and every persona."""
    config = {"story": story(words=1000).to_dict(), **MagnetConfig.profile_settings("default")}
    calls = _run(tmp_path, "magnet", config, StoryLLM(critic=reaches_every_goal)).ledger.llm_calls()
    for role in ("critic", "narrator"):
        texts = _role_texts(calls, role)
        assert any(PARAGRAPH_TEXT in t for t in texts) and all(t.count("Name: ") == 3 for t in texts), role
