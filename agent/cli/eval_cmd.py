"""``fabula eval``: judge stored runs, compute metrics and statistics, write reports.

Judges are any OpenAI-compatible endpoint (``--judge-endpoint URL --judge-model NAME``) or
the embedded model. Judgments are stored in each judged run; a failed one is recorded and
excluded (the command exits 1 so scripts notice), and rerunning fills in only what is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.cli.checks import bounded_int, output_dir, server_url
from agent.cli.common import loud
from agent.cli.errors import CLIError
from agent.cli.rundir import expand_batches, open_run, store_errors
from agent.limits import TOKEN_CAP
from agent.userinput import SEED_MAX


def add_parser(sub) -> None:
    parser = sub.add_parser("eval", help="judge runs, model-free metrics, paired statistics and reports")
    ev = parser.add_subparsers(dest="eval_command", required=True, metavar="WHAT")

    p = ev.add_parser("consistency", help="extended ConStory-Bench: five category judgments per story, CED")
    _runs(p)
    p.add_argument("--window-chapters", type=int, metavar="K", help="judge the last K chapters (default: by length)")
    p.add_argument(
        "--window-words", type=int, metavar="W", help="judge the fewest last chapters spanning at least W words"
    )
    _judge_options(p)
    p.set_defaults(handler=run_consistency)

    p = ev.add_parser("quality", help="writing quality: five cached query-specific criteria, each scored 1-10")
    _runs(p)
    p.add_argument("--criteria-cache", metavar="DIR", help="criteria cache (default: $FABULA_HOME/eval/criteria)")
    _judge_options(p)
    p.set_defaults(handler=run_quality)

    p = ev.add_parser("editorial", help="Magnet's editorial annotations and rubric (repeat --judge-model to average)")
    _runs(p)
    p.add_argument(
        "--seed", type=bounded_int(0, SEED_MAX), default=0, help="seed of the section and sentence sampler (default 0)"
    )
    _judge_options(p)
    p.set_defaults(handler=run_editorial)
    _add_inject(ev)
    _add_tables(ev)


def _add_inject(ev) -> None:
    p = ev.add_parser("inject", help="judge recall check: plant contradictions in copies of a story and judge them")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run to copy and plant contradictions in")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="folder for the injected copies (made if missing)")
    p.add_argument(
        "--depths",
        default="adjacent,midpoint,opening",
        help="where the earlier half goes: adjacent (just before the window), midpoint (of the prefix), "
        "opening (first chapter); comma-separated (default: all three)",
    )
    p.add_argument(
        "--controls", type=bounded_int(0, 100), default=2, help="control pairs that do not contradict (default 2)"
    )
    p.add_argument("--no-judge", action="store_true", help="only make the injected copies")
    p.add_argument(
        "--window-chapters", type=int, metavar="K", help="judge the last K chapters of each copy (default: by length)"
    )
    _judge_options(p)
    p.set_defaults(handler=run_inject)


def _add_tables(ev) -> None:
    """The commands that read stored judgments and metrics only: metrics, report, compare."""
    p = ev.add_parser("metrics", help="model-free metrics of runs (no judge)")
    _runs(p)
    p.add_argument("--json", action="store_true", help="one JSON object per run")
    p.set_defaults(handler=run_metrics)

    p = ev.add_parser("report", help="Markdown report with tables and plots, from stored judgments only")
    _runs(p)
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="folder for report.md, metrics.json and plots")
    _selection(p)
    p.set_defaults(handler=run_report)

    p = ev.add_parser("compare", help="paired comparison A vs B (vs C ...): t-test, bootstrap CI, Holm")
    p.add_argument("a", nargs="+", metavar="A_RUN", help="the runs to compare (or batch folders)")
    p.add_argument(
        "--vs",
        nargs="+",
        action="append",
        required=True,
        metavar="B_RUN",
        help="baseline runs; repeat --vs for several baselines (Holm then runs across the baselines at each length)",
    )
    p.add_argument("--metric", action="append", help="metric to compare (repeatable; default: all)")
    p.add_argument("--seed", type=bounded_int(0, SEED_MAX), default=0, help="bootstrap seed (default 0)")
    p.add_argument(
        "--resamples", type=bounded_int(100, 1_000_000), default=10_000, help="bootstrap resamples (default 10000)"
    )
    p.add_argument(
        "--allow-mixed",
        action="store_true",
        help="pair runs judged by different judge setups or criteria (marked in the output)",
    )
    p.add_argument("--json", action="store_true", help="print the comparisons as JSON")
    _selection(p)
    p.set_defaults(handler=run_compare)


def _selection(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--include-incomplete",
        action="store_true",
        help="also score runs that are incomplete, outside the length gate or not fully judged (marked)",
    )


def _runs(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="runs, or batch folders (their completed stories)")


def _judge_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("judge")
    g.add_argument(
        "--judge-endpoint",
        metavar="URL",
        type=server_url,
        help="OpenAI-compatible server (env FABULA_JUDGE_ENDPOINT; default: the embedded model)",
    )
    g.add_argument(
        "--judge-model",
        action="append",
        metavar="NAME",
        help="judge model name (env FABULA_JUDGE_MODEL; repeat for several judges: averaged where "
        "the protocol says so)",
    )
    g.add_argument("--judge-api-key", metavar="KEY", help="env FABULA_JUDGE_API_KEY")
    g.add_argument("--judge-temperature", type=float, default=0.1, help="the judge's temperature (default 0.1)")
    g.add_argument(
        "--judge-max-tokens",
        type=bounded_int(1, TOKEN_CAP),
        default=8192,
        metavar="N",
        help="longest judgment in tokens (default 8192; each request is fitted to the judge's context)",
    )
    g.add_argument(
        "--judge-context-tokens",
        type=int,
        metavar="N",
        help="the judge's context (default: what its server or the embedded model states)",
    )
    g.add_argument(
        "--judge-seed", type=bounded_int(0, SEED_MAX), default=0, metavar="N", help="the judge's seed (default 0)"
    )


def open_judges(args: argparse.Namespace) -> list[Any]:
    """The judges named on the command line (one per --judge-model)."""
    from agent.cli.options import choose_judge
    from agent.eval.judge import Judge

    names = args.judge_model or [None]
    judges = []
    for name in names:
        llm = choose_judge(args.judge_endpoint, name, args.judge_api_key).open()
        judges.append(
            Judge(
                llm,
                name or llm.model,
                temperature=args.judge_temperature,
                max_tokens=args.judge_max_tokens,
                seed=args.judge_seed,
                endpoint=args.judge_endpoint or "embedded",
                context_tokens=getattr(args, "judge_context_tokens", None),
            )
        )
    return judges


def _close(judges: list[Any]) -> None:
    for judge in judges:
        judge.llm.close()


def _line(run: str, counts: dict[str, int]) -> str:
    return f"{run}: {counts['ok']} judged, {counts['failed']} failed, {counts['skipped']} already stored"


def _judge_each_run(args: argparse.Namespace, judge_run: Callable[[Any, Any, list[Any], str], int]) -> int:
    """Open the judges once, apply ``judge_run(store, story, judges, run_dir)`` to every run (it
    returns its number of failed judgments), close the judges; exit 1 if any judgment failed."""
    from agent.eval.story import load_story

    run_dirs = expand_batches(args.run_dirs)
    judges = open_judges(args)
    failed = 0
    try:
        for run_dir in run_dirs:
            with open_run(run_dir, readonly=False) as store:
                failed += judge_run(store, load_story(store), judges, run_dir)
    finally:
        _close(judges)
    return 1 if failed else 0


def run_consistency(args: argparse.Namespace) -> int:
    from agent.eval.ced import best_scores
    from agent.eval.consistency import judge_consistency

    def judge_run(store, story, judges, run_dir) -> int:
        from agent.eval.consistency import fits, story_tokens
        from agent.eval.windows import choose_window

        failed = 0
        for judge in judges:
            window = choose_window(story, chapters=args.window_chapters, min_words=args.window_words)
            if fits(story, judge, window) is False:
                raise CLIError(
                    f"{run_dir}: the story (about {story_tokens(story)} tokens) and a judgment of at least "
                    f"{judge.min_output} tokens do not fit the judge's context ({judge.budget().context} "
                    "tokens) in one call, as this protocol asks (the whole story is the evidence); use a "
                    "judge with a larger context, or fabula check FILE (a long book judged in spans)"
                )
            window, counts = judge_consistency(
                store, story, judge, window_chapters=args.window_chapters, window_words=args.window_words
            )
            failed += counts["failed"]
            print(
                _line(run_dir, counts) + f" [{judge.label}; window: chapters {window.first}-"
                f"{len(story.sections)}, {window.checked_words} words; {window.rule}]"
            )
        for score in best_scores(store, story):
            m = score.metrics()
            print(
                f"  {score.judge}: subtype CED {m['subtype_ced']:.2f}, instance CED {m['instance_ced']:.2f}"
                f", verified {m['verified_instance_ced']:.2f} ({m['dropped_unverified']} dropped)"
            )
        return failed

    return _judge_each_run(args, judge_run)


def run_quality(args: argparse.Namespace) -> int:
    from agent.eval.quality import default_cache_dir, judge_quality, quality_scores

    cache = Path(args.criteria_cache).expanduser() if args.criteria_cache else default_cache_dir()

    def judge_run(store, story, judges, run_dir) -> int:
        failed = 0
        for judge in judges:
            counts = judge_quality(store, story, judge, cache)
            failed += counts["failed"]
            print(_line(run_dir, counts) + f" [{judge.label}]")
        for label, score in quality_scores(store, story).items():
            print(f"  {label}: writing quality {score:.2f}")
        return failed

    return _judge_each_run(args, judge_run)


def run_editorial(args: argparse.Namespace) -> int:
    from agent.eval.editorial import editorial_scores, judge_editorial

    def judge_run(store, story, judges, run_dir) -> int:
        counts = judge_editorial(store, story, judges, seed=args.seed)
        print(_line(run_dir, counts))
        result = editorial_scores(store, story)
        if result:
            print(
                f"  annotations {result['annotations']:.1f}, rubric {result['rubric']:.1f} "
                f"(judges: {', '.join(result['judges'])})"
            )
        return counts["failed"]

    return _judge_each_run(args, judge_run)


def run_inject(args: argparse.Namespace) -> int:
    from agent.eval.inject import DEPTHS, make_injected_copies, recall_table, render_recall

    depths = [d.strip() for d in args.depths.split(",") if d.strip()]
    bad = [d for d in depths if d not in DEPTHS]
    if bad:
        raise CLIError(f"unknown depth(s) {', '.join(bad)}; use {', '.join(DEPTHS)}")
    with store_errors():
        copies = make_injected_copies(
            args.run_dir,
            output_dir(args.out),
            depths=depths,
            controls=args.controls,
            window_chapters=args.window_chapters,
        )
    print(f"{len(copies)} injected copies in {args.out}")
    if args.no_judge:
        return 0
    from agent.eval.consistency import judge_consistency
    from agent.eval.story import load_story

    judges = open_judges(args)
    failed = 0
    try:
        for copy in copies:
            with open_run(str(copy), readonly=False) as store:
                for judge in judges:
                    _, counts = judge_consistency(store, load_story(store), judge, window_chapters=args.window_chapters)
                    failed += counts["failed"]
    finally:
        _close(judges)
    with store_errors():
        print("\n".join(render_recall(recall_table(copies))))
    return 1 if failed else 0


def _rows(run_dirs: list[str]) -> list[dict[str, Any]]:
    from agent.eval.collect import run_row

    rows = []
    for run_dir in expand_batches(run_dirs):
        with open_run(run_dir) as store:
            rows.append(run_row(store))
    return rows


def run_metrics(args: argparse.Namespace) -> int:
    from agent.eval.textmetrics import model_free_metrics

    for run_dir in expand_batches(args.run_dirs):
        with open_run(run_dir) as store:
            metrics = model_free_metrics(store)
        if args.json:
            print(json.dumps({"run": run_dir, **metrics}, ensure_ascii=False, default=str))
            continue
        print(run_dir)
        for key, value in metrics.items():
            if key not in ("state_sizes", "style_distances"):
                print(f"  {key:32} {value:.4g}" if isinstance(value, float) else f"  {key:32} {value}")
    return 0


def run_report(args: argparse.Namespace) -> int:
    from agent.eval.eligibility import select
    from agent.eval.report import write_report

    output_dir(args.out)
    rows = _rows(args.run_dirs)
    kept, selection = select([r for r in rows if not r.get("injection")], include_incomplete=args.include_incomplete)
    print("\n".join(selection))
    path = write_report(
        kept, Path(args.out).expanduser(), selection=selection, injected=[r for r in rows if r.get("injection")]
    )
    print(f"wrote {path}")
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from agent.eval.compare import METRICS, MixedJudgesError, compare, render
    from agent.eval.eligibility import select

    metrics = tuple(args.metric) if args.metric else METRICS
    if args.resamples < 1:
        raise CLIError("--resamples must be at least 1")
    a, selection = select(_rows(args.a), include_incomplete=args.include_incomplete)
    baselines = []
    for group in args.vs:
        kept, lines = select(_rows(group), include_incomplete=args.include_incomplete)
        baselines.append(kept)
        selection += lines
    print("\n".join(selection), file=sys.stderr if args.json else sys.stdout)
    try:
        comparisons, notes = compare(
            a, baselines, metrics=metrics, resamples=args.resamples, seed=args.seed, allow_mixed=args.allow_mixed
        )
    except MixedJudgesError as exc:
        raise CLIError(
            "runs judged differently are not paired (--allow-mixed pairs them, marked):", details=exc.lines
        ) from exc
    if args.json:
        print(
            json.dumps(
                {
                    "comparisons": [
                        {
                            "baseline": c.baseline,
                            "metric": c.metric,
                            "length": c.length,
                            **c.result.__dict__,
                            "pairs": c.pairs,
                            "mixed": c.mixed,
                            "marked": c.marked,
                        }
                        for c in comparisons
                    ],
                    "notes": notes,
                    "selection": selection,
                }
            )
        )
    else:
        print("\n".join(render(comparisons, notes)))
    return 0 if comparisons else (print("fabula: no paired, scored runs to compare", file=loud()) or 1)
