"""Runs written by d73c811 (before typed records) still open, show, export, evaluate and plan a resume.

The databases in tests/fixtures/legacy_d73c811 were written once by that commit's code with
scripted models and are never regenerated.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent import pipelines
from agent.cli import main
from agent.eval.story import load_story
from agent.store import RunStore
from agent.store.snapshots import ChapterSnapshot, RunTarget, StepRecord, StepState

LEGACY = Path(__file__).resolve().parent / "fixtures" / "legacy_d73c811"
PIPELINES = ["nst", "rollsum", "direct", "magnet", "single"]
NEW_SETTINGS = {
    "failed_call_budget",
    "profile",
    "prose_sampling",
    "structured_sampling",
    "repetition_guard",
    "repetition_max_rate",
    "repetition_max_span",
    "trim_cut_drafts",
    "critic_example",
}
MAGNET_MEMORY_SETTINGS = {"recall_paragraphs", "recall_words", "recap_every", "recap_tokens", "recap_temperature"}
"""Magnet's long-range memory settings, added by #9."""
ADDED_BY_ISSUE_13 = {
    "context_tokens",
    "context_reserve",
    "min_past_events",
    "evidence",
    "arc_chapters",
    "state_share",
    "digest_max_tokens",
}
ADDED_BY_ISSUE_28 = {
    "prose_max_tokens",
    "premise_from",
    "synopsis_from",
    "acts_from",
    "synopsis_words",
    "free_outline",
    "required_after_failures",
    "fallback_update",
    "atomic_update",
    "paragraph_floor",
    "narrator_rejects_updates",
    "single_prompt",
    "single_max_tokens",
    "reference_prompts",
}
"""The paper profile's settings, each defaulting to what the run did before (#28)."""
ADDED_BY_ISSUE_38 = {"language"}
"""The language a story is written in (#38), detected from the prompt when not given."""
ADDED_BY_ISSUE_33 = {
    "turn_token_overhead",
    "outline_style",
    "search_style",
    "chapter_restarts",
    "terminal_punctuation",
    "state_style",
    "retry_feedback",
    "narrator_calls",
    "goal_calls",
    "tool_protocol",
    "reasoning_tokens",
    "role_inputs",
}
"""The paper profile's budgets, search and state as the reference's published commands run them, and Magnet's
narrator and goal generator in one call each as the paper has them, the native tool protocol, and the room
Magnet's calls leave a thinking model to reason, and the inputs §3.2 lists for each Magnet role (#33)."""
ADDED_BY_ISSUE_35 = {
    "failed_update_limit",
    "fallback_full_update",
    "update_entry_limit",
    "ask_again_looped_update",
    "close_at_length",
}
"""Turns that fail in a row while the update is due end a chapter's turns; the fallback may ask
for one event only; Magnet's closing paragraph may end at the story's length (#35)."""


@pytest.fixture
def run(tmp_path, request):
    shutil.copytree(LEGACY / request.param, tmp_path / request.param)
    return tmp_path / request.param


@pytest.mark.parametrize("run", PIPELINES, indirect=True)
def test_legacy_run_reads_through_the_typed_records(run):
    with RunStore.open(run, readonly=True) as store:
        info = store.info()
        target = RunTarget.of(info.config)
        assert target.words and target.prompt
        assert load_story(store).target_words == target.words
        if info.unit_kind == "chapter":
            snapshots = [ChapterSnapshot.read(store.state(c.index)) for c in store.chapters()]
            assert snapshots and all(s.chapter or info.pipeline == "direct" for s in snapshots)
            if info.pipeline == "nst":
                assert snapshots[-1].state().past_events and snapshots[-1].first_attempt_pass is not None
            if info.pipeline == "rollsum":
                assert snapshots[-1].summary
        else:
            state = StepState.read(store.state())
            assert state.finished and state.words == sum(p.words for p in store.paragraphs())
            records = [StepRecord.read(s["record"]) for s in store.steps()]
            assert [r.step for r in records] == list(range(1, info.last_unit + 1))


@pytest.mark.parametrize("run", PIPELINES, indirect=True)
def test_legacy_run_shows_exports_and_evaluates(run, capsys):
    assert main(["show", str(run)]) == 0
    assert main(["export", str(run), "--format", "md"]) == 0
    assert main(["eval", "metrics", str(run), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"gate_compliance": null' not in out


@pytest.mark.parametrize("run", PIPELINES, indirect=True)
def test_legacy_run_plans_a_resume_under_the_typed_settings(run):
    with RunStore.open(run) as store:
        plan = pipelines.plan_resume(store)
    # settings added since d73c811 show as changes (a resume names them and needs --force, as for
    # any new pipeline default); no value the run stored is ever changed or dropped
    assert all(not c.old_set for c in plan.changes), plan.changes
    assert (
        {c.key.split(".")[0] for c in plan.changes}
        <= NEW_SETTINGS
        | MAGNET_MEMORY_SETTINGS
        | ADDED_BY_ISSUE_13
        | ADDED_BY_ISSUE_28
        | ADDED_BY_ISSUE_38
        | ADDED_BY_ISSUE_35
        | ADDED_BY_ISSUE_33
    ), plan.changes
