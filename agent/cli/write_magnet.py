"""``fabula write NAME STORY.toml`` for every pipeline that writes from a story definition file:
``fabula write magnet STORY.toml`` and ``fabula write single --story STORY.toml``.

Magnet: character agents, critic, narrator and goal sequencing over a world graph; the
single-model baseline writes the same definition without any of them. Both are step runs:
``fabula resume RUN_DIR`` continues from the last committed timestep, ``fabula show`` and
``fabula export`` work on them, and ``python -m agent.magnet.history RUN_DIR`` prints the
world-state commit history (or exports the graph as JSON, DOT or SVG).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent import pipelines
from agent.cli.checks import output_dir
from agent.cli.errors import CLIError
from agent.cli.next_step import print_if_done
from agent.cli.options import add_model_options, add_role_options, choose_model, open_client
from agent.cli.profile_choice import PROFILE_CHOICES, PROFILE_HELP, asked_profile, choose_profile
from agent.cli.progress import ProgressDisplay
from agent.cli.rundir import discard_if_unused, store_errors
from agent.settings import parse_assignments


def add_parser(sub) -> None:
    for name in pipelines.names(takes="story"):
        described = pipelines.get(name)
        parser = sub.add_parser(name, help=described.help, description=described.description)
        _common(parser)
        if described.model_roles:
            add_role_options(parser, described.model_roles)
        if described.flags:
            group = parser.add_argument_group(described.flag_group) if described.flag_group else parser
            for flag in described.flags:
                flag.add_to(group)
        parser.set_defaults(handler=run, writer=name)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("story_file", nargs="?", metavar="STORY.toml", help="the story definition")
    parser.add_argument("--story", metavar="FILE", help="the story definition (same as the positional argument)")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--pages", type=float, metavar="N", help="target length in pages (overrides the file)")
    length.add_argument("--words", type=int, metavar="N", help="target length in words (overrides the file)")
    parser.add_argument("--page-words", type=int, metavar="N", help="words per page (default 500)")
    parser.add_argument("-o", "--out", metavar="RUN_DIR", help="run directory (default: runs/<title>-<time>)")
    parser.add_argument("--profile", choices=PROFILE_CHOICES, help=PROFILE_HELP)
    parser.add_argument(
        "--set",
        "--setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="any other setting, e.g. --set narrator_temperature=0.5 (see agent/magnet/settings.py; "
        "--setting is an alias)",
    )
    add_model_options(parser)


def load_story(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration entries of the story definition the arguments name (its length as asked)."""
    if args.story_file and args.story and args.story_file != args.story:
        raise CLIError("give the story definition once (positional or --story)")
    path = args.story_file or args.story
    if not path:
        first = pipelines.names(takes="story")[0]
        raise CLIError(f"a story definition is needed: fabula write {first} STORY.toml")
    reader = pipelines.get(args.writer).story_config
    assert reader is not None, f"{args.writer} takes a story file but cannot read one"
    return reader(Path(path), pages=args.pages, words=args.words, page_words=args.page_words)


def settings_config(args: argparse.Namespace, flags: dict[str, Any], profile: str = "default") -> dict[str, Any]:
    """The settings the user changed (the pipeline's defaults fill in the rest); validated when
    the run is configured, so a bad value is one line and nothing is created."""
    from agent.magnet.settings import MagnetSettings

    settings = getattr(pipelines.get(args.writer), "settings", None) if getattr(args, "writer", None) else None
    # the pipeline's own profiles: the single baseline's differ from Magnet's (no critic, one prompt)
    out = (settings if settings is not None else MagnetSettings).profile_settings(profile)
    given = parse_assignments(args.overrides)
    if "story" in given:
        raise CLIError("--set story: the story comes from STORY.toml (its length from --words or --pages)")
    out.update(given)
    out.update({key: value for key, value in flags.items() if value is not None})
    return out


def _run_dir(args: argparse.Namespace, title: str) -> str:
    if args.out:
        return args.out
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40] or "story"
    return f"runs/{slug}-{time.strftime('%Y%m%d-%H%M%S')}"


def _start(args: argparse.Namespace, name: str, build: Callable[[str], dict[str, Any]]) -> int:
    """Check every setting and the run folder, open the one client, let the profile follow the model, write."""
    checked = build("default")
    pipelines.get(name).settle(checked)  # checked before anything is opened
    output_dir(_run_dir(args, checked["story"]["title"]))
    roles = pipelines.get(name).model_roles
    llm, model = open_client(choose_model(args, profile=asked_profile(args.profile), roles=roles))
    try:
        profile = choose_profile(args.profile, model)
        config = build(profile.name)
        settings = pipelines.get(name).settle(config)  # validated once, handed to the run typed
        run_dir = _run_dir(args, config["story"]["title"])
        if profile.reason and profile.name != "default":
            print(f"fabula: {profile.reason}", file=sys.stderr)
        print(
            f"fabula: writing {config['story']['title']!r} ({config['story']['target_words']} words) with {name} "
            f"into {run_dir} with {llm.describe()}"
            + (f", profile {profile.name}" if profile.name != "default" else ""),
            file=sys.stderr,
        )
        existed = Path(run_dir).exists()
        try:
            with store_errors():
                store = pipelines.start(
                    run_dir,
                    name,
                    settings,
                    llm,
                    events=ProgressDisplay(unit_name="step"),
                    model=model,
                    notes={"profile_choice": profile.record()},
                )
        except BaseException:
            discard_if_unused(Path(run_dir), existed)
            raise
    finally:
        model.close()
    try:
        info = store.info()
        words = sum(p.words for p in store.paragraphs())
        print(f"{store.run_dir}: {info.status}, {info.last_unit} steps, {words} words")
        print_if_done(run_dir, info.status)
        return 0 if info.status == "completed" else 1
    finally:
        store.close()


def run(args: argparse.Namespace) -> int:
    story = load_story(args)
    flags = pipelines.get(args.writer).flags
    values = {flag.setting: flag.read(args) for flag in flags if flag.kind is not None}
    switches = {flag.setting: flag.read(args) for flag in flags if flag.kind is None}

    def build(profile: str) -> dict[str, Any]:
        config = settings_config(args, values, profile)
        config.update({key: value for key, value in switches.items() if value is not None})
        return {**config, **story}

    return _start(args, args.writer, build)
