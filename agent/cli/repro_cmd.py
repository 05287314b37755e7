"""``fabula repro GRID``: a paper's experiment grid written, judged and reported as its tables.

GRID is a shipped grid by name (``fabula repro --list``) or a TOML file. The whole grid is
checked before anything is created (bad input: one line, exit 2). ``--estimate`` prints the
calls, tokens and hours of every cell from a scripted simulation at the grid's real lengths and
a tokens/s figure (``--tokens-per-s``, or measured on the server), and writes nothing. Exit 0
when every story is complete and judged, 1 otherwise (a rerun continues).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from agent.cli.checks import finite, output_dir, server_url
from agent.cli.common import loud
from agent.cli.errors import CLIError
from agent.cli.options import add_model_options, choose_judge, choose_model, open_client
from agent.cli.progress import BatchDisplay

if TYPE_CHECKING:
    from agent.llm import LLM


def add_parser(sub) -> None:
    p = sub.add_parser(
        "repro",
        help="reproduce a paper's table: a grid of stories written, judged and reported",
        description="Write every story of a grid (methods x lengths x seeds x prompts) through fabula "
        "batch, judge them and report the papers' tables (OUT/report.md). Resumable: finished runs "
        "are never redone, and a grid can grow.",
    )
    p.add_argument(
        "grid",
        nargs="?",
        metavar="GRID",
        help="a shipped grid (smoke, nst-table3, nst-ablations, magnet-table1) or a grid file (.toml)",
    )
    p.add_argument("-o", "--out", metavar="DIR", help="the grid's folder (default: runs/repro-NAME)")
    p.add_argument("--prompts", metavar="FILE.jsonl", help="the prompt set, instead of the grid's")
    p.add_argument("--list", action="store_true", help="list the shipped grids")
    p.add_argument(
        "--estimate",
        action="store_true",
        help="print calls, tokens and hours per cell before anything runs (nothing is written)",
    )
    p.add_argument(
        "--tokens-per-s",
        type=finite(0.0, 1e9, low_open=True),
        metavar="N",
        help="completion tokens per second of the server for --estimate (default: measured on it)",
    )
    p.add_argument("--no-judge", action="store_true", help="write and report without judging")
    p.add_argument("--quiet", action="store_true", help="no live progress")
    g = p.add_argument_group("judge (default: the grid's [judge], then FABULA_JUDGE_*, then the config file)")
    g.add_argument("--judge-endpoint", metavar="URL", type=server_url, help="the judge's OpenAI-compatible server")
    g.add_argument("--judge-model", metavar="NAME", help="the judge's model name")
    g.add_argument("--judge-api-key", metavar="KEY", help="env FABULA_JUDGE_API_KEY")
    add_model_options(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.repro import cells
    from agent.repro.grid import load_grid, shipped

    if args.list or args.grid is None:
        if args.grid is None and not args.list:
            raise CLIError(f"fabula repro needs a GRID: one of {', '.join(shipped())}, or a .toml file")
        for name in shipped():
            grid = load_grid(name)
            print(f"{name:16} {grid.description}")
        return 0
    grid = load_grid(args.grid, prompts=args.prompts)
    out = Path(args.out or f"runs/repro-{grid.name}").expanduser()
    if args.estimate:
        return _estimate(args, grid)
    planned = cells.plan(grid, out)  # every cell checked before anything is created
    output_dir(out)
    return _write(args, grid, out, planned)


def _estimate(args: argparse.Namespace, grid) -> int:
    from agent.repro.estimate import estimate, measure_tokens_per_s, render

    rate, source = args.tokens_per_s, "given (--tokens-per-s)"
    if rate is None:
        chosen = choose_model(args)
        if chosen.backend != "endpoint":
            raise CLIError("--estimate needs --tokens-per-s N, or a server (--endpoint URL) to measure it on")
        _, llm = open_client(chosen)
        try:
            rate = measure_tokens_per_s(llm)
        finally:
            llm.close()
        source = f"measured on {chosen.endpoint}"
    print("\n".join(render(grid, estimate(grid), rate, source)))
    return 0


def _write(args: argparse.Namespace, grid, out: Path, planned) -> int:
    from agent.repro.run import judge_from, run_grid

    chosen, model = open_client(choose_model(args))
    print(
        f"fabula: repro {grid.name} into {out}: {len(planned)} cells, "
        f"{sum(len(p.stories) for p in planned)} stories, profile {grid.profile}, with {chosen.describe()}",
        file=sys.stderr,
    )
    judge = None
    owned: list[LLM] = []
    try:
        if not args.no_judge:
            judge_llm, endpoint = _open_judge(args, grid, chosen, model, owned)
            judge = judge_from(grid.judge, judge_llm, args.judge_model or grid.judge.model or judge_llm.model, endpoint)
        shared = model if chosen.backend != "endpoint" else None
        if shared is None:
            model.close()
        try:
            result = run_grid(
                grid, out, llm=chosen, judge=judge, model=shared, sink=BatchDisplay(quiet=args.quiet), planned=planned
            )
        except KeyboardInterrupt:
            print(
                f"fabula: repro stopped; run the same command again to continue: fabula repro {args.grid} -o {out}",
                file=loud(),
            )
            raise
    finally:
        for llm in owned:
            llm.close()
        if chosen.backend != "endpoint":
            model.close()
    print("\n".join([*result.lines, ""]) + result.text)
    print(f"wrote {result.report}")
    return 0 if result.complete else 1


def _open_judge(args: argparse.Namespace, grid, chosen, model, owned: list[LLM]):
    """The judge model: flags, then the grid's [judge], then env/config; the writer's embedded model
    is shared when the judge is embedded too (loaded once)."""
    endpoint = args.judge_endpoint or grid.judge.endpoint
    options = choose_judge(
        endpoint,
        args.judge_model or grid.judge.model,
        args.judge_api_key,
        endpoint_source="flag" if args.judge_endpoint else "the grid file",
    )
    if options.backend != "endpoint" and chosen.backend != "endpoint" and options.model in (None, chosen.model):
        return model, None
    _, llm = open_client(options)
    owned.append(llm)
    return llm, options.endpoint
