"""``fabula write magnet STORY.toml`` and ``fabula write single --story STORY.toml``.

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
from pathlib import Path
from typing import Any

from agent import pipelines
from agent.cli.checks import output_dir
from agent.cli.errors import CLIError
from agent.cli.options import add_model_options, check_server, model_options
from agent.cli.progress import ProgressDisplay
from agent.cli.rundir import discard_if_unused, store_errors
from agent.llm.options import LLMOptions
from agent.settings import parse_assignments


def add_parser(sub) -> None:
    magnet = sub.add_parser("magnet", help="Magnet: persona agents, critic, narrator, goal sequencing",
                            description="Write a story with Magnet from a story definition (TOML). Examples: "
                            "agent/magnet/examples/*.toml.")
    _common(magnet)
    group = magnet.add_argument_group("Magnet (paper defaults; all recorded in the run)")
    group.add_argument("--max-revisions", type=int, metavar="N", help="critic revisions per action (default 3)")
    group.add_argument("--stall-steps", type=int, metavar="N", help="replace a goal not completed in N steps "
                       "(default 15)")
    group.add_argument("--shift-every", type=int, metavar="N", help="domain-shifting goal every N steps (default 40)")
    group.add_argument("--history-window", type=int, metavar="N", help="recent paragraphs each role sees (default 3)")
    group.add_argument("--no-critic", action="store_true",
                       help="ablation: no critic; each character states its own world updates and goal completion")
    group.add_argument("--no-goal-shift", action="store_true",
                       help="ablation: no goal generator; the initial goal stays (the ending is cued to the narrator)")
    group.add_argument("--no-structured-state", action="store_true",
                       help="ablation: no world graph; no role sees or writes state")
    magnet.set_defaults(handler=run_magnet)

    single = sub.add_parser("single", help="the single-model baseline on a Magnet story definition",
                            description="One model writes the story paragraph by paragraph from the definition, "
                            "without agents, critic, state or goals, to the same length.")
    _common(single)
    single.set_defaults(handler=run_single)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("story_file", nargs="?", metavar="STORY.toml", help="the story definition")
    parser.add_argument("--story", metavar="FILE", help="the story definition (same as the positional argument)")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--pages", type=float, metavar="N", help="target length in pages (overrides the file)")
    length.add_argument("--words", type=int, metavar="N", help="target length in words (overrides the file)")
    parser.add_argument("--page-words", type=int, metavar="N", help="words per page (default 500)")
    parser.add_argument("--out", metavar="RUN_DIR", help="run directory (default: runs/<title>-<time>)")
    parser.add_argument("--profile", choices=["default", "small"], default="default",
                        help="small: sampling penalties and the other aids that keep small models writing "
                        "(each still a setting); default: as the paper")
    parser.add_argument("--set", "--setting", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="any other setting, e.g. --set narrator_temperature=0.5 (see agent/magnet/settings.py; "
                        "--setting is an alias)")
    add_model_options(parser)


def load_story(args: argparse.Namespace):
    from agent.magnet.definition import load_definition

    if args.story_file and args.story and args.story_file != args.story:
        raise CLIError("give the story definition once (positional or --story)")
    path = args.story_file or args.story
    if not path:
        raise CLIError("a story definition is needed: fabula write magnet STORY.toml")
    return load_definition(path).with_length(pages=args.pages, words=args.words, page_words=args.page_words)


def settings_config(args: argparse.Namespace, flags: dict[str, Any]) -> dict[str, Any]:
    """The settings the user changed (the pipeline's defaults fill in the rest); validated when
    the run is configured, so a bad value is one line and nothing is created."""
    from agent.magnet.settings import MagnetSettings

    out = MagnetSettings.profile_settings(args.profile)
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


def _start(args: argparse.Namespace, name: str, config: dict[str, Any]) -> int:
    pipelines.get(name).configure(config, LLMOptions())  # every setting checked before anything is created
    run_dir = _run_dir(args, config["story"]["title"])
    output_dir(run_dir)
    llm = check_server(model_options(args))
    print(f"fabula: writing {config['story']['title']!r} ({config['story']['target_words']} words) with {name} "
          f"into {run_dir} with {llm.describe()}" + (f", profile {config.get('profile')}"
                                                      if config.get("profile", "default") != "default" else ""),
          file=sys.stderr)
    existed = Path(run_dir).exists()
    try:
        with store_errors():
            store = pipelines.start(run_dir, name, config, llm, events=ProgressDisplay(unit_name="step"))
    except BaseException:
        discard_if_unused(Path(run_dir), existed)
        raise
    try:
        info = store.info()
        words = sum(p.words for p in store.paragraphs())
        print(f"{store.run_dir}: {info.status}, {info.last_unit} steps, {words} words "
              f"(fabula show {run_dir}; fabula export {run_dir})")
        return 0 if info.status == "completed" else 1
    finally:
        store.close()


def run_magnet(args: argparse.Namespace) -> int:
    story = load_story(args)
    flags = {"max_revisions": args.max_revisions, "stall_steps": args.stall_steps,
             "shift_every": args.shift_every, "history_window": args.history_window}
    config = settings_config(args, flags)
    if args.no_critic:
        config["critic"] = False
    if args.no_goal_shift:
        config["goal_shift"] = False
    if args.no_structured_state:
        config["structured_state"] = False
    return _start(args, "magnet", {**config, "story": story.to_dict()})


def run_single(args: argparse.Namespace) -> int:
    story = load_story(args)
    return _start(args, "single", {**settings_config(args, {}), "story": story.to_dict()})
