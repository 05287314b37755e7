"""What ``fabula`` alone (or ``fabula --help``) prints: the commands grouped by what a writer does, the
everyday ones first; and "did you mean ...?" for a mistyped command (``fabula wrte``)."""

from __future__ import annotations

import difflib

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "write and revise",
        ("write", "resume", "outline", "approve", "revise", "edit", "reconcile", "fork", "continue", "sequel", "bible"),
    ),
    ("read and export", ("view", "runs", "show", "watch", "search", "lint", "export", "import")),
    ("models and servers", ("models", "serve", "doctor", "prompt", "config")),
    ("research and evaluation", ("check", "derive", "batch", "eval", "repro", "story")),
    ("developer tools", ("grammars", "completion")),
)
"""Every command in exactly one group (tests/cli/test_desk_cli.py checks it), in the order help lists them."""

FIRST_STEPS = (
    'fabula write nst --prompt "A lighthouse keeper finds a bell that rings by itself." --out lighthouse',
    "fabula view lighthouse",
)


def grouped_help(helps: dict[str, str]) -> str:
    """The commands as help lists them: one block per group, each command with its one-line help."""
    width = max(len(name) for name in helps) + 2
    lines = []
    for title, names in GROUPS:
        lines.append(f"{title}:")
        lines += [f"  {name:<{width}}{helps.get(name, '')}" for name in names if name in helps]
        lines.append("")
    lines.append("A first story (on the embedded model, no server):")
    lines += [f"  {step}" for step in FIRST_STEPS]
    lines += ["", "fabula COMMAND --help tells more about one command."]
    return "\n".join(lines)


def did_you_mean(word: str, names: list[str]) -> str:
    """One line for an unknown command: the closest command(s) by spelling, or where to look."""
    close = difflib.get_close_matches(word, names, n=2, cutoff=0.6)
    if close:
        return f"'{word}' is not a fabula command; did you mean {' or '.join(close)}?"
    return f"'{word}' is not a fabula command; fabula --help lists them"
