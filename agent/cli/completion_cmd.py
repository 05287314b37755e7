"""``fabula completion bash|zsh|tcsh``: a shell completion script for every command and option,
generated from the parser itself by shtab (so it never falls behind the commands)."""

from __future__ import annotations

import argparse
import sys

from agent.cli.errors import CLIError

SHELLS = ("bash", "zsh", "tcsh")


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or tcsh)",
        description="Print a completion script for fabula's commands and options. "
        'bash: eval "$(fabula completion bash)" in ~/.bashrc; zsh: fabula completion zsh '
        '> "${fpath[1]}/_fabula".',
    )
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        import shtab
    except ImportError as exc:
        raise CLIError("shell completion needs shtab: pip install shtab") from exc
    sys.stdout.write(shtab.complete(args.root_parser, shell=args.shell))
    return 0
