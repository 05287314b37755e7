"""``fabula write NAME`` for every pipeline that writes from a prompt (NstAgent and its baselines).

Input is checked before anything is created (prompt, length, prompt file, the server), so a
bad invocation leaves no run directory behind; a run that fails later is stored as failed,
never as completed, and ``fabula resume`` continues it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from agent import pipelines
from agent.cli.checks import output_dir
from agent.cli.errors import CLIError
from agent.cli.next_step import print_if_done
from agent.cli.options import add_model_options, choose_model, open_client
from agent.cli.profile_choice import PROFILE_CHOICES, PROFILE_HELP, asked_profile, choose_profile
from agent.cli.progress import ProgressDisplay
from agent.cli.review_cmd import (
    add_drafts_options,
    add_review_option,
    drafts_setting,
    lint_avoid_setting,
    review_lines,
    review_of,
)
from agent.cli.rundir import discard_if_unused, store_errors
from agent.cli.voice_inputs import add_voice_options, voice_notes
from agent.settings import Settings, WordRange, parse_assignments
from agent.store import RunStore
from agent.store.snapshots import ChapterSnapshot, RunTarget
from agent.store.writer.review import REVIEW_KEY
from agent.text import read_capped

MAX_PROMPT_BYTES = 1 << 20


def add_parser(sub) -> None:
    for name in pipelines.names(takes="prompt"):
        described = pipelines.get(name)
        parser = sub.add_parser(name, help=described.help, description=described.description)
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--prompt", metavar="TEXT", help="the story prompt")
        source.add_argument("--prompt-file", metavar="FILE", help="a text file holding the story prompt")
        source.add_argument(
            "--prompts",
            metavar="FILE.jsonl",
            help="a prompt set (one JSON object a line, with id and prompt); pick one with --id",
        )
        parser.add_argument("--id", dest="prompt_id", metavar="N", help="the prompt's id in --prompts")
        span = described.words or WordRange(1, 0)
        parser.add_argument(
            "--words", type=int, required=True, metavar="N", help=f"target length in words ({span.low}-{span.high})"
        )
        parser.add_argument("-o", "--out", metavar="RUN_DIR", help="run directory (default: runs/<pipeline>-<time>)")
        parser.add_argument("--temperature", type=float, help="sampling temperature (default 0.7)")
        parser.add_argument(
            "--context-tokens",
            type=int,
            metavar="N",
            help="the model's context length (default: the server's max_model_len, else the "
            "embedded model's config); every request is fitted to it",
        )
        group = parser.add_argument_group(described.flag_group) if described.flag_group else parser
        for flag in described.flags:
            flag.add_to(group)
        if described.planned:
            parser.add_argument("--plan-cache", metavar="DIR", help="plan cache folder (default $FABULA_HOME/plans)")
            parser.add_argument(
                "--plan-only",
                action="store_true",
                help="stop once the outline is stored: see or change it with fabula outline RUN "
                "[--edit], then write the chapters with fabula resume RUN",
            )
            add_review_option(parser)
        if described.drafts:
            add_drafts_options(parser)
        parser.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            dest="overrides",
            help="any other setting (VALUE is JSON, else a string), e.g. --set read_budget=5",
        )
        parser.add_argument("--profile", choices=PROFILE_CHOICES, help=PROFILE_HELP)
        parser.add_argument("--quiet", action="store_true", help="no live progress line")
        add_voice_options(parser)
        add_model_options(parser)
        parser.set_defaults(handler=run, writer=name)


def load_prompt(args: argparse.Namespace) -> tuple[str, str | None]:
    """The prompt text and its id in a prompt set (``None`` for a free prompt)."""
    if args.prompt is not None:
        text, prompt_id = args.prompt, None
    elif args.prompt_file is not None:
        try:
            text = read_capped(args.prompt_file, MAX_PROMPT_BYTES).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CLIError(f"cannot read --prompt-file {args.prompt_file}: {exc}") from exc
        prompt_id = None
    else:
        if args.prompt_id is None:
            raise CLIError("--prompts needs --id N")
        text, prompt_id = prompt_from_set(args.prompts, args.prompt_id), str(args.prompt_id)
    if args.prompt_id is not None and args.prompts is None:
        raise CLIError("--id only goes with --prompts")
    if not text.strip():
        raise CLIError("the story prompt is empty")
    return text.strip(), prompt_id


def prompt_from_set(path: str, prompt_id: str) -> str:
    """The prompt ``prompt_id`` of a set read and validated whole (``agent.prompt_set``, as ``batch`` reads it)."""
    from agent.prompt_set import prompt_by_id

    return prompt_by_id(path, prompt_id)


def build_config(args: argparse.Namespace, prompt: str, prompt_id: str | None, profile: str = "default") -> Any:
    """The run's typed settings from the flags and ``--set``, validated once (one line per bad value); handed
    to :func:`agent.pipelines.start` as they are."""
    pipeline = pipelines.get(args.writer)
    config: dict[str, Any] = {"prompt": prompt, "prompt_id": prompt_id, "words": pipeline.check_words(args.words)}
    flags = {
        "temperature": args.temperature,
        "context_tokens": getattr(args, "context_tokens", None),
        **{flag.setting: flag.read(args) for flag in pipeline.flags},
        "plan_cache": str(output_dir(args.plan_cache, flag="--plan-cache"))
        if getattr(args, "plan_cache", None)
        else None,
    }
    if getattr(args, "language", None):
        flags["language"] = args.language
    config.update({k: v for k, v in flags.items() if v is not None})
    config.update(pipeline.settings.profile_settings(profile))  # type: ignore[union-attr]
    config.update(parse_assignments(args.overrides))
    return pipeline.settle(config)  # every setting validated before anything is created (a plugin's: its type)


def summary_lines(store, writer: str) -> list[str]:
    info = store.info()
    chapters = store.chapters()
    words = sum(c.words for c in chapters)
    degraded = [c.index for c in chapters if c.degraded]
    snapshots = [ChapterSnapshot.read(store.state(c.index)) for c in chapters]
    firsts = [s.first_attempt_pass for s in snapshots if s.first_attempt_pass is not None]
    calls = store.ledger.llm_calls()
    prompt = sum(c.prompt_tokens for c in calls)
    cached = sum(c.cached_prompt_tokens for c in calls)
    lines = [
        f"{writer}: {info.status}, {len(chapters)} of {info.target_units} chapter(s), {words} words "
        f"(target {RunTarget.of(info.config).words})",
        f"degraded chapters: {', '.join(map(str, degraded)) if degraded else 'none'}",
    ]
    if firsts:
        lines.append(f"first-attempt gate pass: {sum(firsts)}/{len(firsts)} ({100 * sum(firsts) / len(firsts):.0f}%)")
    lines.append(
        f"LLM calls: {len(calls)}, prompt tokens {prompt} ({100 * cached / prompt if prompt else 0:.0f}% "
        f"cached), completion tokens {sum(c.completion_tokens for c in calls)}"
    )
    narrative = snapshots[-1].state() if snapshots else None
    if narrative is not None:
        lines.append(
            f"state: {len(narrative.characters)} characters, {len(narrative.past_events)} past events, "
            f"{len(narrative.future_requirements)} open requirements"
        )
    return lines


def run(args: argparse.Namespace) -> int:
    prompt, prompt_id = load_prompt(args)
    build_config(args, prompt, prompt_id)  # every setting checked before the model is opened
    review = review_of(args)
    drafts = drafts_setting(args)
    voice, initial_state = voice_notes(args)  # --style and --bible read and checked before anything is created
    output_dir(Path(args.out or "runs"))
    llm, model = open_client(choose_model(args, profile=asked_profile(args.profile)))
    try:
        profile = choose_profile(args.profile, model)
        config = build_config(args, prompt, prompt_id, profile.name)
        values = config.stored() if isinstance(config, Settings) else config
        avoid = lint_avoid_setting(args, values.get("profile"))
        out = Path(args.out or f"runs/{args.writer}-{time.strftime('%Y%m%d-%H%M%S')}")
        existed = out.exists()
        if profile.reason and profile.name != "default":
            print(f"fabula: {profile.reason}", file=sys.stderr)
        print(
            f"fabula: writing {args.writer} ({values['words']} words) into {out} with {llm.describe()}"
            + (f", profile {profile.name}" if profile.name != "default" else ""),
            file=sys.stderr,
        )
        store = None
        try:
            with store_errors():
                store = pipelines.start(
                    out,
                    args.writer,
                    config,
                    llm,
                    events=ProgressDisplay(quiet=args.quiet),
                    model=model,
                    notes={
                        "profile_choice": profile.record(),
                        **({REVIEW_KEY: review} if review else {}),
                        **drafts,
                        **avoid,
                        **voice,
                    },
                    initial_state=initial_state if pipelines.get(args.writer).seeded else None,
                    plan_only=getattr(args, "plan_only", False),
                )
        except BaseException:
            discard_if_unused(out, existed)
            raise
    finally:
        model.close()
    try:
        if getattr(args, "plan_only", False):
            return _planned(store, args.writer)
        waiting = review_lines(store, str(store.run_dir))
        if waiting:
            print("\n".join(waiting))
            return 0
        for line in summary_lines(store, args.writer):
            print(line)
        print(f"run directory: {store.run_dir}")
        print_if_done(store.run_dir, store.info().status)
        return 0 if store.info().status == "completed" else 1
    finally:
        store.close()


def _planned(store: RunStore, writer: str) -> int:
    """After ``--plan-only``: what was planned, and the two next steps."""
    title = store.plans.get("title") or "(untitled)"
    print(
        f'{writer}: outline stored: "{title}", {len(store.plans.get("outline") or [])} chapter(s); no chapter '
        f"written (status {store.info().status})"
    )
    print(f"next: fabula outline {store.run_dir}    (print it; --edit to change it)")
    print(f"      fabula resume {store.run_dir}    (write the chapters from it)")
    return 0
