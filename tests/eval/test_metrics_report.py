"""Model-free metrics by hand; quality and editorial scoring; compare; report from the store only."""

from __future__ import annotations

import json

import pytest

import agent.llm
import agent.llm.options
from agent.cli import main
from agent.eval.collect import run_row
from agent.eval.compare import compare
from agent.eval.editorial import editorial_scores, judge_editorial, sample
from agent.eval.judge import Judge
from agent.eval.quality import judge_quality, quality_scores
from agent.eval.story import load_story
from agent.eval.textmetrics import distinct_n, repeated_ngram_rate, requirement_history, tokens
from agent.llm import EndpointUnavailableError
from agent.llm.types import CallRecord
from agent.store import RunStore
from tests.eval.helpers import judge_llm, make_run, schema_name, words


def test_distinct_and_repetition_by_hand():
    toks = tokens("The cat sat. The cat sat! The dog")
    assert toks == ["the", "cat", "sat", "the", "cat", "sat", "the", "dog"]
    assert distinct_n(toks, 1) == pytest.approx(4 / 8)
    assert distinct_n(toks, 2) == pytest.approx(4 / 7)  # the-cat, cat-sat, sat-the, the-dog
    # 4-grams: tcst, csto, stc(a)... 5 in all, "the cat sat the" twice -> 1 repeat of 5
    assert repeated_ngram_rate(toks, 4) == pytest.approx(1 / 5)
    assert distinct_n(["a"], 2) is None


def test_requirements_opened_and_resolved():
    states = [
        (1, {"narrative": {"future_requirements": {"a": "x", "b": "y"}}}),
        (2, {"narrative": {"future_requirements": {"b": "y", "c": "z"}}}),
        (3, {"narrative": {"future_requirements": {"c": "z"}}}),
    ]
    assert requirement_history(states) == {
        "requirements_opened": 3,
        "requirements_resolved": 2,
        "requirements_open_at_end": 1,
    }
    assert requirement_history([(1, {"summary": "s"})])["requirements_opened"] is None


def test_model_free_row(tmp_path):
    states = [
        {"narrative": {"characters": {"A": {}}, "past_events": {"e1": "x"}, "future_requirements": {"r": "1"}}},
        {"narrative": {"characters": {"A": {}}, "past_events": {"e1": "x", "e2": "y"}, "future_requirements": {}}},
    ]
    run = make_run(tmp_path, "r", [words(100), words(150)], target=250, targets=[100, 100], states=states)
    with RunStore.open(run) as store:
        store.ledger.record_llm_call(CallRecord("writer", "scripted", "m", 0.7, 100, None, 1000, 600, 250, 1.0, "stop"))
        row = run_row(store)
    assert row["gate_unit"] == "chapter" and row["gate_passed"] == 1 and row["gate_compliance"] == 0.5  # 150 > 120
    assert row["requirements_opened"] == 1 and row["requirements_resolved"] == 1
    assert [s["past_events"] for s in row["state_sizes"]] == [1, 2]
    assert row["total_tokens_per_1k_words"] == pytest.approx(1250 / 0.25)
    assert row["cached_share"] == pytest.approx(0.6)
    assert row["instance_ced"] is None and row["writing_quality"] is None  # never judged: not zero


def criterion_reply(request):
    """Criterion k of five is named c(k-1), so the scores below can tell them apart."""
    k = int(request.messages[1]["content"].split("Design criterion ")[1].split(" ")[0])
    bands = {f"band_{b}": f"band {b}" for b in ("1_2", "3_4", "5_6", "7_8", "9_10")}
    return {"name": f"c{k - 1}", "description": "d", **bands}


def test_quality_criteria_cached_and_mean(tmp_path):
    def reply(request):
        if schema_name(request) == "CriterionDesign":
            return criterion_reply(request)
        name = request.messages[1]["content"].split("Criterion: ")[1].split("\n")[0]
        return {"reason": "r", "score": int(name[1]) + 4}  # 4, 5, 6, 7, 8 -> mean 6

    llm = judge_llm(reply)
    cache = tmp_path / "cache"
    for name in ("a", "b"):
        run = make_run(tmp_path, name, [words(50)], prompt="Same prompt.")
        with RunStore.open(run) as store:
            story = load_story(store)
            assert judge_quality(store, story, Judge(llm, "j"), cache)["ok"] == 5
            assert quality_scores(store, story) == {"j": pytest.approx(6.0)}
    assert [schema_name(r) for r in llm.requests].count("CriterionDesign") == 5  # designed once, reused
    assert len(list(cache.iterdir())) == 1
    designs = [r.messages[1]["content"] for r in llm.requests if schema_name(r) == "CriterionDesign"]
    assert "so far" not in designs[0] and "1. c0: d" in designs[4] and "4. c3: d" in designs[4]
    (criteria,) = [json.loads(p.read_text())["criteria"] for p in cache.iterdir()]
    assert [b["scores"] for b in criteria[0]["bands"]] == ["1-2", "3-4", "5-6", "7-8", "9-10"]


def test_interrupted_criteria_design_resumes_from_the_cached_ones(tmp_path):
    designs = {"n": 0}

    def reply(request):
        if schema_name(request) == "CriterionDesign":
            designs["n"] += 1
            return EndpointUnavailableError("down") if designs["n"] == 3 else criterion_reply(request)
        return {"reason": "r", "score": 7}

    run = make_run(tmp_path, "a", [words(50)])
    with RunStore.open(run) as store:
        story = load_story(store)
        assert judge_quality(store, story, Judge(judge_llm(reply), "j"), tmp_path / "c")["failed"] == 5
        assert judge_quality(store, story, Judge(judge_llm(reply), "j"), tmp_path / "c")["ok"] == 5
    assert designs["n"] == 6  # two kept, the third failed, then third to fifth: none designed twice


def test_quality_failure_leaves_story_unscored(tmp_path):
    run = make_run(tmp_path, "a", [words(50)])
    calls = {"n": 0}

    def reply(request):
        if schema_name(request) == "CriterionDesign":
            return criterion_reply(request)
        calls["n"] += 1
        return EndpointUnavailableError("down") if calls["n"] == 3 else {"reason": "r", "score": 7}

    with RunStore.open(run) as store:
        story = load_story(store)
        assert judge_quality(store, story, Judge(judge_llm(reply), "j"), tmp_path / "c")["failed"] == 1
        assert quality_scores(store, story) == {}
        assert judge_quality(store, story, Judge(judge_llm(reply), "j"), tmp_path / "c") == {
            "skipped": 4,
            "ok": 1,
            "failed": 0,
        }
        assert quality_scores(store, story) == {"j": pytest.approx(7.0)}


def editorial_reply(per_level: int, overall: int):
    def reply(request):
        name = schema_name(request)
        if name == "StoryAnnotations":
            return {"annotations": [{"category": "thematic_coherence", "quote": "", "note": "n"}] * per_level}
        if name == "SectionAnnotations":
            return {"annotations": [{"category": "necessity", "quote": "q", "note": "n"}] * per_level}
        if name == "SentenceAnnotations":
            return {"annotations": [{"sentence": 1, "category": "clarity", "note": "n"}] * per_level}
        keys = {
            "StoryRubric": ("logical_consistency", "thematic_coherence", "character_arcs"),
            "SectionRubric": ("goal_conflict_outcome", "hook_and_close", "necessity"),
            "SentenceRubric": ("rhythm", "clarity", "syntax_variety"),
        }[name]
        return {**dict.fromkeys(keys, 50), "overall": overall}

    return reply


def test_editorial_sampler_and_two_judges_averaged(tmp_path):
    chapters = [
        f"Chapter {i} begins here with some words. It goes on for a while longer. " + words(20) for i in range(1, 9)
    ]
    run = make_run(tmp_path, "e", chapters)
    with RunStore.open(run) as store:
        story = load_story(store)
        s0 = sample(story, 0)
        assert s0 == sample(story, 0) and s0 != sample(story, 1)
        assert len(s0.sections) == 5 and len(s0.sentences) == 5 and s0.sections == sorted(s0.sections)
        judges = [
            Judge(judge_llm(editorial_reply(1, 80), "a"), "a"),
            Judge(judge_llm(editorial_reply(3, 60), "b"), "b"),
        ]
        assert judge_editorial(store, story, judges, seed=0)["ok"] == 2 * 10
        result = editorial_scores(store, story)
    # judge a: 1 + 5*1 + 1 = 7 annotations, rubric 80; judge b: 3 + 15 + 3 = 21, rubric 60
    assert result["annotations"] == pytest.approx(14.0)
    assert result["annotations_by_level"] == {"story": 2.0, "section": 10.0, "sentence": 2.0}
    assert result["rubric"] == pytest.approx(70.0)


def ced_judge(n_instances: int):
    def reply(request):
        if schema_name(request) != "FactualDetailReport":
            return {"contradictions": []}
        return {
            "contradictions": [
                {
                    "subtype": "quantitative_mismatches",
                    "exact_quote": "word",
                    "quote_chapter": 1,
                    "contradicting_quote": "word",
                    "contradicting_chapter": 1,
                    "explanation": "e",
                }
            ]
            * n_instances
        }

    return reply


@pytest.fixture
def scripted_cli(monkeypatch):
    """The CLI's judges are scripted by the instance count the run name asks for."""
    import agent.cli.eval_cmd as eval_cmd

    state = {"fn": None}

    def open_judges(args):
        return [Judge(judge_llm(lambda r: state["fn"](r)), "judge-x")]

    monkeypatch.setattr(eval_cmd, "open_judges", open_judges)
    return state


def test_compare_and_report_from_stored_judgments_only(tmp_path, scripted_cli, monkeypatch, capsys):
    a_runs, b_runs = [], []
    for length in (1_000, 1_100):  # 1,000 words is inside the +-20% gate of both
        for side, counts in (("a", [1, 2, 1, 0]), ("b", [3, 3, 2, 2])):
            for pid, n in enumerate(counts):
                scripted_cli["fn"] = ced_judge(n)
                run = make_run(
                    tmp_path,
                    f"{side}{pid}-{length}",
                    [words(1000)],
                    target=length,
                    prompt_id=str(pid),
                    pipeline="nst" if side == "a" else "rollsum",
                )
                assert main(["eval", "consistency", str(run), "--window-chapters", "1"]) == 0
                (a_runs if side == "a" else b_runs).append(str(run))
    capsys.readouterr()

    def no_model(*args, **kwargs):
        raise AssertionError("a report must not call a model")

    monkeypatch.setattr(agent.llm, "open_llm", no_model)
    monkeypatch.setattr(agent.llm.options.LLMOptions, "open", no_model)
    scripted_cli["fn"] = no_model
    assert main(["eval", "compare", *a_runs, "--vs", *b_runs, "--metric", "instance_ced", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    [c10, c20] = out["comparisons"]
    # per-prompt instance CED = 10 * n (1,000 checked words): differences -20, -10, -10, -20 -> mean -15
    assert (c10["length"], c10["n"], c10["diff"]) == (1_000, 4, pytest.approx(-15.0))
    assert c10["p_holm"] == pytest.approx(min(1.0, 2 * min(c10["p"], c20["p"])))
    assert c10["ci_low"] <= -15.0 <= c10["ci_high"]
    assert main(["eval", "report", *a_runs, *b_runs, "--out", str(tmp_path / "rep")]) == 0
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "| a0-1000 |" in report and "10.00" in report
    png = (tmp_path / "rep" / "ced_vs_length.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and "![ced_vs_length.png](ced_vs_length.png)" in report
    metrics = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    assert sorted(round(m["instance_ced"]) for m in metrics if "/a" in m["run"] and m["run"].endswith("-1000")) == [
        0,
        10,
        10,
        20,
    ]
    # regeneration gives the same report
    before = report
    assert main(["eval", "report", *a_runs, *b_runs, "--out", str(tmp_path / "rep")]) == 0
    assert (tmp_path / "rep" / "report.md").read_text() == before
    assert (tmp_path / "rep" / "ced_vs_length.png").read_bytes() == png  # no timestamp in the PNG


def test_report_without_matplotlib_keeps_tables_and_says_how_to_get_plots(tmp_path, monkeypatch):
    import agent.eval.report as report

    run = make_run(tmp_path, "a", [words(50)])
    with RunStore.open(run) as store:
        row = run_row(store)
    monkeypatch.setattr(report, "plots_available", lambda: False)
    text = report.write_report([row], tmp_path / "rep").read_text()
    assert "| a |" in text and "No plots: matplotlib is not installed: run scripts/setup" in text
    assert not list((tmp_path / "rep").glob("*.png"))


def test_cli_failed_judgment_exits_1_and_rerun_fills_it(tmp_path, scripted_cli, capsys):
    run = make_run(tmp_path, "f", [words(500)])
    scripted_cli["fn"] = lambda r: (
        EndpointUnavailableError("503") if schema_name(r) == "NarrativeStyleReport" else {"contradictions": []}
    )
    assert main(["eval", "consistency", str(run)]) == 1
    assert "4 judged, 1 failed" in capsys.readouterr().out
    scripted_cli["fn"] = lambda r: {"contradictions": []}
    assert main(["eval", "consistency", str(run)]) == 0
    out = capsys.readouterr().out
    assert "1 judged, 0 failed, 4 already stored" in out and "instance CED 0.00" in out


def test_compare_pairs_by_prompt_and_notes_unpaired():
    a = [
        {"run": "a1", "prompt_key": "id:1", "target_words": 10, "instance_ced": 1.0},
        {"run": "a2", "prompt_key": "id:2", "target_words": 10, "instance_ced": 2.0},
    ]
    b = [
        {"run": "b1", "prompt_key": "id:1", "target_words": 10, "instance_ced": 3.0},
        {"run": "b3", "prompt_key": "id:3", "target_words": 10, "instance_ced": None},
    ]
    comparisons, notes = compare(a, [b], metrics=("instance_ced",))
    assert len(comparisons) == 1 and comparisons[0].pairs == [("a1", "b1")] and comparisons[0].result.n == 1
    assert any("a2 has no partner" in n for n in notes) and any("b3 has no partner" in n for n in notes)
