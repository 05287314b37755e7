"""``fabula show RUN_DIR``: progress, size, calls, tokens and health of one run."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from agent.cli.rundir import open_run
from agent.llm.types import TIMING_PARTS
from agent.nst.best_of.runner import choice_lines
from agent.store.reports.costs import RoleTiming, per_role_timing
from agent.store.reports.stats import RunSummary, summarize
from agent.store.writer.review import describe, in_review, next_steps
from agent.style.report import chapter_distances, style_lines
from agent.userinput import printable


def add_parser(sub) -> None:
    parser = sub.add_parser("show", help="progress, words, calls, tokens and degraded chapters of a run")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run directory")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the summary as one JSON object (the keys of `fabula runs --json`, plus history and server_probe)",
    )
    parser.add_argument(
        "--history",
        action="store_true",
        help="Magnet runs: also list every world-state commit per timestep (when, by whom, why); "
        "the graph itself: python -m agent.magnet.history RUN_DIR --format json|dot|svg",
    )
    parser.add_argument(
        "--versions",
        action="store_true",
        help="list every edited chapter or step with its versions (words, why, when) and the later "
        "units the edit made stale; the text of version N: fabula export RUN_DIR --version N",
    )
    parser.add_argument(
        "--timing",
        action="store_true",
        help="where the model calls' time went, per role: KV-cache restore, grammar compile, "
        "prefill, decode, mask, sampling (in-process engines; a server's calls show latency only)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    with open_run(args.run_dir) as store:
        summary = summarize(store)
        path = store.run_dir
        history = _magnet_history(store) if args.history else None
        probe = store.plans.server_probe()
        versions = version_lines(store) if args.versions else None
        waiting = in_review(store)
        drafts = choice_lines(store)
        timing = per_role_timing(store) if args.timing else None
        guide = store.plans.get("style")
        style = chapter_distances(guide, store.chapters())
        style_text = style_lines(guide, store.chapters())
    if args.json:
        extra: dict[str, Any] = {"history": history} if history is not None else {}
        extra.update({"server_probe": probe} if probe else {})
        extra.update({"style": style} if style else {})
        extra.update({"versions": versions_json(versions)} if versions is not None else {})
        extra.update({"drafts": drafts} if drafts else {})
        extra.update({"timing": [timing_json(t) for t in timing]} if timing is not None else {})
        extra.update({"in_review": {**waiting, "next": next_steps(args.run_dir, waiting)}} if waiting else {})
        print(json.dumps({"run_dir": str(path), **summary.as_dict(), **extra}, ensure_ascii=False))
        return 0
    review: list[str] = []
    if waiting:
        review = [
            f"review    {describe(waiting).removeprefix('in review: ')}; go on with:",
            *(f"          {line}" for line in next_steps(args.run_dir, waiting)),
        ]
    lines = [
        *render(summary, str(path), internals=args.verbose),
        *review,
        *(_server_lines(probe) if args.verbose else []),
        *style_text,
        *(("drafts    " if i == 0 else "          ") + line for i, line in enumerate(drafts)),
        *(("history   " if i == 0 else "          ") + line for i, line in enumerate(history or [])),
        *(versions_text(versions) if versions is not None else []),
        *(timing_lines(timing) if timing is not None else []),
    ]
    for line in lines:
        print(printable(line))  # a title or a server's text never reaches the terminal as an escape sequence
    return 0


def timing_json(sums: RoleTiming) -> dict:
    return {
        "role": sums.role,
        "calls": sums.calls,
        "timed_calls": sums.timed,
        "prompt_tokens": sums.prompt_tokens,
        "cached_prompt_tokens": sums.cached_prompt_tokens,
        "completion_tokens": sums.completion_tokens,
        "latency_s": round(sums.latency_s, 3),
        **{f"{p}_s": round(v, 3) for p, v in sums.parts.items()},
        "other_s": round(sums.other, 3),
        "decode_tokens_per_s": round(sums.decode_rate, 1) if sums.decode_rate else None,
    }


def timing_lines(rows: list[RoleTiming]) -> list[str]:
    """``--timing``: one line per role, seconds per part, and the decode rate."""
    if not rows:
        return ["timing    no model calls yet"]
    head = (
        f"{'role':<16}{'calls':>6}{'prompt':>9}{'cached':>8}{'out':>7}{'latency':>9}"
        + "".join(f"{p:>10}" for p in TIMING_PARTS)
        + f"{'other':>8}{'decode/s':>9}"
    )
    lines = ["timing    seconds per part (in-process engines)", "          " + head]
    for t in rows:
        rate = f"{t.decode_rate:.1f}" if t.decode_rate else "-"
        parts = "".join(f"{t.parts[p]:>10.1f}" if t.timed else f"{'-':>10}" for p in TIMING_PARTS)
        other = f"{t.other:>8.1f}" if t.timed else f"{'-':>8}"
        lines.append(
            f"          {t.role:<16}{t.calls:>6}{t.prompt_tokens:>9}{t.cached_prompt_tokens:>8}"
            f"{t.completion_tokens:>7}{t.latency_s:>9.1f}{parts}{other}{rate:>9}"
        )
    return lines


def version_lines(store) -> dict:
    """The edited units with their versions, and what the edit made stale (``--versions``)."""
    from agent.store.writer.versions import edited_units, stale, unit_versions

    word = "chapter" if store.info().unit_kind == "chapter" else "step"
    return {
        "unit_kind": word,
        "edited": {u: unit_versions(store, u) for u in edited_units(store)},
        "stale": stale(store),
    }


def versions_json(found: dict) -> dict:
    stale = found["stale"]
    edited = [
        {"unit": u, "versions": [{"version": v.number, "words": v.words, "reason": v.reason, "at": v.at} for v in vs]}
        for u, vs in found["edited"].items()
    ]
    return {
        "edited": edited,
        "stale": None
        if stale is None
        else {"unit": stale.unit, "what": stale.what, "units": stale.units, "state_stale_from": stale.state_stale_from},
    }


def versions_text(found: dict) -> list[str]:
    word, stale = found["unit_kind"], found["stale"]
    if not found["edited"]:
        return [f"versions  no {word} has been edited"]
    lines: list[str] = []
    for unit, versions in found["edited"].items():
        for v in versions:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(v.at)) if v.at else "-"
            head = f"versions  {word} {unit}" if not lines else f"          {word} {unit}"
            why = "written" if v.reason == "write" else v.reason
            lines.append(f"{head}  v{v.number}  {v.words} words  {why}  {when}")
    if stale is not None:
        later = ", ".join(map(str, stale.units)) or "none"
        lines.append(
            f"stale     {word}s written before the edit of {word} {stale.unit}: {later}"
            + (f"; state stale from {word} {stale.state_stale_from}" if stale.state_stale_from else "")
        )
    return lines


def _server_lines(probe: dict | None) -> list[str]:
    """What the endpoint backend found the server to be and enforce (issue 15's probe)."""
    if not probe:
        return []
    from agent.llm.probe import ServerProbe

    known = {k: v for k, v in probe.items() if k in ServerProbe.__dataclass_fields__}
    try:
        found = ServerProbe(**known)
    except TypeError:
        return [f"server    {json.dumps(probe)[:200]}"]
    lines = [f"server    {found.summary().removeprefix('server ')}"]
    return lines + [f"          degraded: {d}" for d in found.degraded]


def _magnet_history(store) -> list[str]:
    """The run's commit history, from its pipeline's record (a pipeline without one refuses)."""
    from agent import pipelines
    from agent.cli.errors import CLIError

    described = pipelines.known(store.info().pipeline)
    if described is None or described.history is None:
        raise CLIError(f"--history is for Magnet runs; this is a {store.info().pipeline} run")
    return described.history(store)


INTERNALS = ("state", "calls", "tokens", "tools", "context", "budget")
"""Lines of ``fabula show`` about how the run was made, not the book: shown with ``-v``."""


def render(s: RunSummary, path: str, *, internals: bool = True) -> list[str]:
    """The summary's lines; without ``internals``, what a writer reads (the book, its progress, what went
    wrong), the ledger's lines (state size, calls, tokens, tools, context) left to ``-v``."""
    lines = _render(s, path)
    return lines if internals else [line for line in lines if line.split(" ", 1)[0] not in INTERNALS]


def _render(s: RunSummary, path: str) -> list[str]:
    unit = "chapters" if s.unit_kind == "chapter" else "steps"
    progress = f"{s.units_done}/{s.target_units}" if s.target_units is not None else f"{s.units_done}"
    state_counts = ", ".join(f"{k} {v}" for k, v in s.state_counts.items())
    share = f"{s.cached_share:.0%}" if s.cached_share is not None else "-"
    tools = ", ".join(f"{k} {v}" for k, v in s.tool_calls.items()) or "none"
    lines = [
        f"run       {path}",
        f"pipeline  {s.pipeline}  model {s.model or '-'} ({s.backend or '-'}"
        + (f" at {s.endpoint}" if s.endpoint else "")
        + ")"
        + (f"  profile {s.profile}" if s.profile else ""),
        f"status    {s.status}" + (f"  ({s.error})" if s.error else ""),
        f"progress  {progress} {unit}",
        f"words     {s.words}",
        f"chapters  {s.chapters}"
        + (f"  ({s.revised_chapters} revised)" if s.revised_chapters else "")
        + (f"   steps {s.steps}  paragraphs {s.paragraphs}" if s.unit_kind == "step" else ""),
        f"state     {_size(s.state_bytes)}" + (f"  ({state_counts})" if state_counts else ""),
        f"calls     {s.llm_calls}" + (f"  ({s.llm_errors} failed)" if s.llm_errors else ""),
        f"tokens    prompt {s.prompt_tokens}  cached {s.cached_prompt_tokens}  completion {s.completion_tokens}"
        f"  cached share {share}",
        f"tools     {tools}" + (f"  ({s.tool_errors} errors)" if s.tool_errors else ""),
        f"wall time {_duration(s.wall_s)} over {s.sessions} session(s)",
        f"updated   {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(s.updated_at))}",
    ]
    if s.context:
        c = s.context
        lines.append(f"context   {_context_words(c)}")
    if s.budget_actions or s.context:
        lines.append("budget    " + (", ".join(f"{k} {v}" for k, v in s.budget_actions.items()) or "nothing gave way"))
    if s.degraded:
        lines.append(
            "degraded  " + "; ".join(f"chapter {d['chapter']}: {d['reason'] or 'no reason given'}" for d in s.degraded)
        )
    else:
        lines.append("degraded  none")
    return lines


def _context_words(c: dict) -> str:
    """The run's context as ``show -v`` says it: its size and where it came from, how tokens were counted."""
    counted = (
        f"tokens counted exactly ({c.get('counter')})"
        if c.get("exact_counts")
        else "token counts estimated from the characters"
    )
    source = str(c.get("source") or "")
    if not c.get("context_tokens"):
        return f"not known, so not budgeted (no setting, server or model config said it); {counted}"
    return f"{c['context_tokens']} tokens (from the {source.removeprefix('the ')}); {counted}"


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"
