"""``fabula repro GRID``: a paper's experiment grid written, judged and reported as its tables.

GRID is a shipped grid by name (``fabula repro --list``) or a TOML file. The whole grid is
checked before anything is created (bad input: one line, exit 2). ``--estimate`` prints the
calls, tokens and hours of every cell from a scripted simulation at the grid's real lengths and
a tokens/s figure (``--tokens-per-s``, or measured on the server), and writes nothing. Exit 0
when every story is complete and judged, 1 otherwise (a rerun continues).

A pipeline's roles (Magnet's) may each have a model of their own, as with ``fabula write``:
``--role-model ROLE=MODEL`` and ``--role-endpoint ROLE=URL`` over the grid's ``[roles]`` and a
method's ``roles``, over the config file's ``role_models``/``role_endpoints``. A cell that exists
goes on with the role models its batch recorded (a flag still wins).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from agent import pipelines
from agent.cli.checks import finite, output_dir, server_url
from agent.cli.common import loud
from agent.cli.errors import CLIError
from agent.cli.options import (
    add_model_options,
    add_role_options,
    choose_judge,
    choose_model,
    model_flags,
    open_client,
)
from agent.cli.progress import BatchDisplay
from agent.llm import option_table
from agent.llm.options import LLMOptions, ModelFlags

if TYPE_CHECKING:
    from agent.llm import LLM
    from agent.repro.cells import PlannedCell
    from agent.repro.grid import Grid


def add_parser(sub) -> None:
    p = sub.add_parser(
        "repro",
        help="reproduce a paper's table: a grid of stories written, judged and reported",
        description="Write every story of a grid (methods x lengths x seeds x prompts) through fabula "
        "batch, judge them and report the papers' tables (OUT/report.md). Resumable: finished runs "
        "are never redone, and a grid can grow. Magnet's roles may each have a model of their own: the "
        "--role-model/--role-endpoint flags over the grid's [roles] and a method's roles, over the config file.",
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
    add_role_options(p, _pipeline_roles())
    p.set_defaults(handler=run)


def _pipeline_roles() -> dict[str, tuple[str, ...]]:
    """The roles that may have a model of their own, of every pipeline that has them (what
    ``fabula write NAME`` offers as ``--role-model`` for each)."""
    return {role: serves for name in pipelines.names() for role, serves in pipelines.get(name).model_roles.items()}


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
    flags = _flags(args, grid)
    out = Path(args.out or f"runs/repro-{grid.name}").expanduser()
    if args.estimate:
        return _estimate(args, grid, flags)
    planned = cells.plan(grid, out)  # every cell checked before anything is created
    output_dir(out)
    return _write(args, grid, out, planned, flags)


def _flags(args: argparse.Namespace, grid: Grid) -> ModelFlags:
    """The model flags, each role they name one of the grid's pipelines' (else one line, exit 2)."""
    flags = model_flags(args)
    known = grid.model_roles()
    for row in option_table.role_flags():
        given = sorted(getattr(flags, row.field, None) or {})
        if given and not known:
            raise CLIError(f"{row.flag}: no method of this grid has roles with models of their own")
        unknown = [role for role in given if role not in known]
        if unknown:
            raise CLIError(f"{row.flag}: unknown role {unknown[0]!r}; roles: {', '.join(known)}")
    return flags


def _writer(flags: ModelFlags) -> ModelFlags:
    """The run's model: the flags without the roles' (each cell's pipeline decides those)."""
    return replace(flags, role_models=None, role_endpoints=None)


def _cell_models(
    args: argparse.Namespace, grid: Grid, planned: list[PlannedCell], writer: LLMOptions, flags: ModelFlags
) -> dict[str, LLMOptions]:
    """The model of each cell whose roles have models of their own, by cell folder. A new cell's
    roles: the flags, then the method's ``roles``, the grid's ``[roles]``, the config file; a cell
    that exists goes on with what its batch recorded (the flags still win), as ``fabula resume`` does."""
    from agent.batch import BatchStore
    from agent.batch.runner import stored_batch_model
    from agent.repro.grid import RoleModels

    given = RoleModels(flags.role_models or {}, flags.role_endpoints or {})
    base = ModelFlags.of(writer)
    chosen: dict[str, LLMOptions] = {}
    for p in planned:
        pipeline = p.cell.method.pipeline
        roles = pipelines.get(pipeline).model_roles
        if not roles:
            continue
        if p.exists:
            with BatchStore.open(p.folder, readonly=True) as batch:
                stored = batch.info().get("llm")
            record = stored_batch_model(stored if isinstance(stored, dict) else {}, pipeline)
            own = given.over(RoleModels(), roles)
        else:
            record, own = None, given.over(grid.roles_of(p.cell.method), roles)
        cell = replace(base, role_models=dict(own.models) or None, role_endpoints=dict(own.endpoints) or None)
        options = choose_model(args, flags=cell, stored=record, roles=None if p.exists else roles)
        if options.roles:
            chosen[p.cell.folder] = options
    return chosen


def _served(chosen: dict[str, LLMOptions]) -> dict[str, LLMOptions]:
    """Each cell's roles' servers probed before anything is created (each set of models once), and
    the model a server serves filled in where a role named none (so its runs record it)."""
    opened: dict[str, LLMOptions] = {}
    served = {}
    for folder, options in chosen.items():
        key = json.dumps([options.fingerprinted(), options.transport()], sort_keys=True)
        if key not in opened:
            opened[key], llm = open_client(options)
            llm.close()
        served[folder] = opened[key]
    return served


def _estimate(args: argparse.Namespace, grid: Grid, flags: ModelFlags) -> int:
    from agent.repro.estimate import estimate, measure_tokens_per_s, render

    rate, source = args.tokens_per_s, "given (--tokens-per-s)"
    if rate is None:
        chosen = choose_model(args, flags=_writer(flags))
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


def _write(args: argparse.Namespace, grid: Grid, out: Path, planned: list[PlannedCell], flags: ModelFlags) -> int:
    from agent.repro.run import judge_from, run_grid

    writer = choose_model(args, flags=_writer(flags))
    llms = _cell_models(args, grid, planned, writer, flags)  # a bad role choice: one line, nothing opened
    chosen, model = open_client(writer)
    judge = None
    owned: list[LLM] = []
    try:
        if chosen.backend == "endpoint":
            model.close()  # probed; each story opens its own client
            llms = _served(llms)
        print(
            f"fabula: repro {grid.name} into {out}: {len(planned)} cells, "
            f"{sum(len(p.stories) for p in planned)} stories, profile {grid.profile}, with {chosen.describe()}",
            file=sys.stderr,
        )
        for line in dict.fromkeys(
            _roles_line(p.cell.method.name, llms[p.cell.folder]) for p in planned if p.cell.folder in llms
        ):
            print(line, file=sys.stderr)
        if not args.no_judge:
            judge_llm, endpoint = _open_judge(args, grid, chosen, model, owned)
            judge = judge_from(grid.judge, judge_llm, args.judge_model or grid.judge.model or judge_llm.model, endpoint)
        shared = model if chosen.backend != "endpoint" else None
        try:
            result = run_grid(
                grid,
                out,
                llm=chosen,
                judge=judge,
                model=shared,
                sink=BatchDisplay(quiet=args.quiet),
                planned=planned,
                llms=llms,
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


def _roles_line(method: str, options: LLMOptions) -> str:
    return f"fabula: {method}: " + "; ".join(role.describe() for role in options.roles)


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
