"""What a published comparison may score: complete, in-gate, fully judged runs; pairs judged alike;
Holm per column across several baselines; the injection recall table in the report."""

from __future__ import annotations

import json

import pytest

from agent.cli import main
from agent.eval.collect import run_row
from agent.eval.compare import MixedJudgesError, compare
from agent.eval.consistency import judge_consistency
from agent.eval.inject import make_injected_copies
from agent.eval.judge import Judge
from agent.eval.quality import judge_quality
from agent.eval.stats import holm
from agent.eval.story import load_story
from agent.llm import EndpointUnavailableError
from agent.store import RunStore
from tests.eval.helpers import judge_llm, make_run, schema_name, words
from tests.eval.test_metrics_report import ced_judge, criterion_reply


def judge(
    store: RunStore, n_instances: int = 1, *, temperature: float = 0.1, fail: str | None = None, model: str = "judge-x"
) -> None:
    def reply(request):
        if fail and schema_name(request) == fail:
            return EndpointUnavailableError("503")
        return ced_judge(n_instances)(request)

    judge_consistency(
        store, load_story(store), Judge(judge_llm(reply, model), model, temperature=temperature), window_chapters=1
    )


def raw_run(
    root,
    name: str,
    chapters: list[tuple[str, bool]],
    *,
    target: int = 1000,
    finish: bool = True,
    planned: int | None = None,
    pipeline: str = "rollsum",
    prompt_id: str = "0",
) -> RunStore:
    """A run written chapter by chapter: ``(text, degraded)``; left unfinished unless ``finish``."""
    store = RunStore.create(
        root / name, pipeline=pipeline, model="writer", config={"prompt": "p", "prompt_id": prompt_id, "words": target}
    )
    if planned is not None:
        store.set_target(planned)
    for i, (text, degraded) in enumerate(chapters, start=1):
        store.commit_chapter(
            i, f"C{i}", text, state={"n": i}, degraded=degraded, degraded_reason="no draft passed" if degraded else None
        )
    if finish:
        store.finish()
    return store


@pytest.fixture
def mixed_set(tmp_path):
    """Four NstAgent runs and four RollSum runs on the same prompts: RollSum 1 is incomplete (2 of 10
    chapters), RollSum 2 has a degraded chapter, RollSum 3 has a failed judgment; the rest are clean."""
    a, b = [], []
    for pid in range(4):
        run = make_run(tmp_path, f"nst{pid}", [words(1000)], target=1000, prompt_id=str(pid))
        with RunStore.open(run) as store:
            judge(store, 1)
        a.append(str(run))
    specs = {0: {}, 1: {"finish": False, "planned": 10}, 2: {"degraded": True}, 3: {"fail": "TimelinePlotReport"}}
    for pid, spec in specs.items():
        chapters = [(words(500), spec.get("degraded", False)), (words(500), False)]
        store = raw_run(
            tmp_path,
            f"rs{pid}",
            chapters,
            finish=spec.get("finish", True),
            planned=spec.get("planned"),
            prompt_id=str(pid),
        )
        judge(store, 3, fail=spec.get("fail"))
        store.close()
        b.append(str(tmp_path / f"rs{pid}"))
    return a, b


def test_compare_scores_only_publishable_runs_and_says_why(mixed_set, capsys):
    a, b = mixed_set
    assert main(["eval", "compare", *a, "--vs", *b, "--metric", "instance_ced", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    [c] = out["comparisons"]
    assert c["n"] == 1 and c["pairs"] == [[a[0], b[0]]] and not c["marked"]
    assert "3 of 4 run(s) left out: incomplete 1, out of gate 1, unfinished judgments 1" in captured.err
    assert "all 4 run(s) are complete" in captured.err
    assert f"{b[1]}: incomplete: status created" in captured.err
    assert f"{b[2]}: out of gate: 1 degraded chapter(s)" in captured.err
    assert f"{b[3]}: unfinished judgments: 1 failed consistency judgment(s)" in captured.err
    # --include-incomplete scores all four pairs, marked
    assert main(["eval", "compare", *a, "--vs", *b, "--metric", "instance_ced", "--include-incomplete"]) == 0
    text = capsys.readouterr().out
    assert "| instance_ced † | 1000 | 3 |" in text  # rs3 stays unscored: its failed judgment is never zero
    assert "3 of 4 run(s) included although not publishable" in text


def test_report_leaves_out_the_same_runs(mixed_set, tmp_path, capsys):
    a, b = mixed_set
    assert main(["eval", "report", *a, *b, "--out", str(tmp_path / "rep")]) == 0
    assert "3 of 8 run(s) left out: incomplete 1, out of gate 1, unfinished judgments 1" in capsys.readouterr().out
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "| rs0 |" in report and "| rs1 " not in report and "| rs2 " not in report and "| rs3 " not in report
    assert "3 of 8 run(s) left out" in report
    assert main(["eval", "report", *a, *b, "--out", str(tmp_path / "all"), "--include-incomplete"]) == 0
    report = (tmp_path / "all" / "report.md").read_text()
    assert "| rs1 † |" in report and "| rs0 |" in report and "not publishable" in report


def test_out_of_gate_chapter_without_degraded_mark_is_left_out(tmp_path):
    run = make_run(tmp_path, "g", [words(100), words(150)], target=200, targets=[100, 100])
    with RunStore.open(run) as store:
        row = run_row(store)
    assert row["excluded"] == ["out of gate: 1 of 2 chapter(s) outside the gate"]
    run = make_run(tmp_path, "h", [words(100), words(120)], target=200, targets=[100, 100])
    with RunStore.open(run) as store:
        assert run_row(store)["excluded"] == []


def test_pairs_judged_by_different_setups_are_refused(tmp_path, capsys):
    rows = {}
    for name, temperature, pipeline in (("x", 0.1, "nst"), ("y", 0.7, "rollsum")):
        run = make_run(tmp_path, name, [words(1000)], target=1000, pipeline=pipeline)
        with RunStore.open(run) as store:
            judge(store, 1 if name == "x" else 2, temperature=temperature)
            rows[name] = run_row(store)
    with pytest.raises(MixedJudgesError) as refused:
        compare([rows["x"]], [[rows["y"]]], metrics=("instance_ced",))
    [line] = refused.value.lines
    assert rows["x"]["run"] in line and rows["y"]["run"] in line and "temperature 0.1 vs 0.7" in line
    assert "model" not in line  # only what differs
    comparisons, notes = compare([rows["x"]], [[rows["y"]]], metrics=("instance_ced", "distinct_2"), allow_mixed=True)
    assert [c.mixed for c in comparisons] == [[(rows["x"]["run"], rows["y"]["run"])], []]  # model-free: no judge
    assert any(n.startswith("MIXED JUDGES (--allow-mixed): instance_ced:") for n in notes)
    # the same through the CLI: one line per pair, exit 2; --allow-mixed marks the table
    assert main(["eval", "compare", rows["x"]["run"], "--vs", rows["y"]["run"], "--metric", "instance_ced"]) == 2
    err = capsys.readouterr().err
    assert "runs judged differently are not paired" in err and "temperature 0.1 vs 0.7" in err
    assert (
        main(
            ["eval", "compare", rows["x"]["run"], "--vs", rows["y"]["run"], "--metric", "instance_ced", "--allow-mixed"]
        )
        == 0
    )
    assert "| instance_ced (mixed judges) |" in capsys.readouterr().out
    # a report's means over runs judged by different setups say so
    same = make_run(tmp_path, "y2", [words(1000)], target=1000, pipeline="nst", prompt_id="2")
    with RunStore.open(same) as store:
        judge(store, 1, temperature=0.7)
    assert main(["eval", "report", rows["x"]["run"], str(same), "--out", str(tmp_path / "rep")]) == 0
    assert "| nst (mixed judges) | 1000 | 2 |" in (tmp_path / "rep" / "report.md").read_text()


def test_same_setup_pairs_and_a_different_model_is_named(tmp_path):
    rows = {}
    for name, model in (("x", "judge-x"), ("y", "judge-x"), ("z", "judge-z")):
        run = make_run(tmp_path, name, [words(1000)], target=1000)
        with RunStore.open(run) as store:
            judge(store, 1, model=model)
            rows[name] = run_row(store)
    assert rows["x"]["judge_setups"]["consistency"] == rows["y"]["judge_setups"]["consistency"]
    compare([rows["x"]], [[rows["y"]]], metrics=("instance_ced",))  # no error
    with pytest.raises(MixedJudgesError, match="model judge-x vs judge-z"):
        compare([rows["x"]], [[rows["z"]]], metrics=("instance_ced",))


def test_quality_scores_against_different_criteria_are_refused(tmp_path):
    """Two criteria caches with different criteria under the same key: the stored digests differ."""
    rows = []
    for name, suffix in (("x", ""), ("y", "-other")):

        def reply(request, suffix=suffix):
            if schema_name(request) == "CriterionDesign":
                design = criterion_reply(request)
                return {**design, "name": design["name"] + suffix}
            return {"reason": "r", "score": 9 if suffix else 5}

        run = make_run(tmp_path, name, [words(1000)], target=1000)
        with RunStore.open(run) as store:
            assert (
                judge_quality(store, load_story(store), Judge(judge_llm(reply), "j"), tmp_path / f"cache-{name}")["ok"]
                == 5
            )
            rows.append(run_row(store))
    assert rows[0]["judge_setups"]["quality"] == rows[1]["judge_setups"]["quality"]
    assert rows[0]["judge_setups"]["criteria"] != rows[1]["judge_setups"]["criteria"]
    with pytest.raises(MixedJudgesError, match="quality criteria"):
        compare([rows[0]], [[rows[1]]], metrics=("writing_quality",))


def rows_for(method: str, values: dict[int, list[float]]) -> list[dict]:
    return [
        {
            "run": f"{method}-{length}-{i}",
            "method": method,
            "prompt_key": f"id:{i}",
            "target_words": length,
            "instance_ced": v,
        }
        for length, vs in values.items()
        for i, v in enumerate(vs)
    ]


def test_holm_across_baselines_at_each_length():
    a = rows_for("nst", {10: [1.0, 2.0, 1.5, 1.2], 20: [1.1, 2.2, 1.4, 1.0]})
    b = rows_for("rollsum", {10: [2.0, 3.1, 2.4, 2.0], 20: [1.9, 3.0, 2.9, 1.5]})
    c = rows_for("direct", {10: [1.3, 2.9, 1.4, 2.5], 20: [3.0, 2.4, 2.0, 1.9]})
    comparisons, _ = compare(a, [b, c], metrics=("instance_ced",), resamples=100)
    assert [(x.baseline, x.length) for x in comparisons] == [
        ("rollsum", 10),
        ("rollsum", 20),
        ("direct", 10),
        ("direct", 20),
    ]
    for length in (10, 20):
        family = [x for x in comparisons if x.length == length]
        assert [x.result.p_holm for x in family] == pytest.approx(holm([x.result.p for x in family]))
    # one baseline: across the lengths, as before
    single, _ = compare(a, [b], metrics=("instance_ced",), resamples=100)
    assert [x.result.p_holm for x in single] == pytest.approx(holm([x.result.p for x in single]))
    by_baseline = [
        p for name in ("rollsum", "direct") for p in holm([x.result.p for x in comparisons if x.baseline == name])
    ]
    assert by_baseline != pytest.approx([x.result.p_holm for x in comparisons])  # the family is the length


def test_cli_takes_several_baselines(tmp_path, capsys):
    runs: dict[str, list[str]] = {"nst": [], "rollsum": [], "direct": []}
    for method, n in (("nst", 1), ("rollsum", 2), ("direct", 3)):
        for pid in range(3):
            run = make_run(tmp_path, f"{method}{pid}", [words(1000)], target=1000, pipeline=method, prompt_id=str(pid))
            with RunStore.open(run) as store:
                judge(store, n + pid % 2)
            runs[method].append(str(run))
    assert (
        main(
            [
                "eval",
                "compare",
                *runs["nst"],
                "--vs",
                *runs["rollsum"],
                "--vs",
                *runs["direct"],
                "--metric",
                "instance_ced",
                "--json",
                "--resamples",
                "200",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert [c["baseline"] for c in out["comparisons"]] == ["rollsum", "direct"]
    assert [c["diff"] for c in out["comparisons"]] == [pytest.approx(-10.0), pytest.approx(-20.0)]
    assert [c["p_holm"] for c in out["comparisons"]] == pytest.approx(holm([c["p"] for c in out["comparisons"]]))


CATEGORY_OF = {
    "CharacterizationReport": "characterization",
    "FactualDetailReport": "factual_detail",
    "NarrativeStyleReport": "narrative_style",
    "TimelinePlotReport": "timeline_plot",
    "WorldBuildingReport": "world_building",
}


def test_report_has_the_length_by_depth_recall_table_and_kendall(tmp_path, capsys):
    copies = []
    for target in (1_000, 2_000):
        source = make_run(
            tmp_path,
            f"src{target}",
            ["\n\n".join(words(100, f"c{n}p{p}") for p in range(3)) for n in range(1, 5)],
            target=target,
        )
        copies += make_injected_copies(
            source, tmp_path / f"inj{target}", depths=["adjacent", "opening"], controls=1, window_chapters=2
        )

    # the judge reports the planted pair only at 1,000 words and only at the adjacent depth
    for copy in copies:
        with RunStore.open(copy) as store:
            record = store.plans.get("eval_injection")
            report_it = record["depth"] == "adjacent" and "inj1000" in str(copy) and not record["control"]

            def scripted(request, record=record, report_it=report_it):
                if not report_it or CATEGORY_OF[schema_name(request)] != record["category"]:
                    return {"contradictions": []}
                return {
                    "contradictions": [
                        {
                            "subtype": record["subtype"],
                            "exact_quote": record["earlier"],
                            "quote_chapter": record["earlier_chapter"],
                            "contradicting_quote": record["later"],
                            "contradicting_chapter": record["later_chapter"],
                            "explanation": "e",
                        }
                    ]
                }

            judge_consistency(store, load_story(store), Judge(judge_llm(scripted), "j"), window_chapters=2)
    assert main(["eval", "report", *map(str, copies), str(tmp_path / "src1000"), "--out", str(tmp_path / "rep")]) == 0
    capsys.readouterr()
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "## Injected contradictions (judge recall)" in report
    assert "20 planted contradiction(s) and 2 control(s) judged" in report
    assert "| target length | adjacent | opening |" in report
    assert "| 1000 | 5/5 | 0/5 |" in report and "| 2000 | 0/5 | 0/5 |" in report
    # 5 of 20 detected, all at 1,000 words: 50 discordant pairs, none concordant, 100 pairs untied in
    # length and 75 untied in detection: tau-b = -50 / sqrt(100 * 75) = -0.577
    [length_line] = [x for x in report.splitlines() if "against target length" in x]
    assert "tau = -0.58" in length_line
    assert "| inj1000" not in report.split("## Injected")[0]  # copies are not stories in the main tables


def test_a_criteria_design_finished_by_a_rerun_is_not_left_unfinished(tmp_path):
    designs = {"n": 0}

    def reply(request):
        if schema_name(request) == "CriterionDesign":
            designs["n"] += 1
            return EndpointUnavailableError("down") if designs["n"] == 3 else criterion_reply(request)
        return {"reason": "r", "score": 7}

    run = make_run(tmp_path, "q", [words(1000)], target=1000)
    with RunStore.open(run) as store:
        story = load_story(store)
        assert judge_quality(store, story, Judge(judge_llm(reply), "j"), tmp_path / "c")["failed"] == 5
        assert run_row(store)["excluded"] == ["unfinished judgments: 1 failed quality_criteria judgment(s)"]
        assert judge_quality(store, story, Judge(judge_llm(reply), "j"), tmp_path / "c")["ok"] == 5
        assert run_row(store)["excluded"] == []


def test_duplicate_runs_of_a_prompt_pair_the_first_and_say_so():
    """#23: keeping the last of duplicate runs passed every test. The first one is paired, the
    repeat is named in a note, and a partner-less run is named too."""
    from agent.eval.compare import pair_rows

    a = [
        {"run": "a1", "prompt_key": "1", "target_words": 1000},
        {"run": "a1-again", "prompt_key": "1", "target_words": 1000},
        {"run": "a2", "prompt_key": "2", "target_words": 1000},
    ]
    b = [{"run": "b1", "prompt_key": "1", "target_words": 1000}]
    pairs, notes = pair_rows(a, b)
    assert {k: (x["run"], y["run"]) for k, (x, y) in pairs.items()} == {("1", 1000): ("a1", "b1")}
    assert any("a1-again repeats prompt 1" in n and "the first is used" in n for n in notes)
    assert any("a2 has no partner" in n for n in notes)
