"""``--review`` on write, resume, continue and sequel, and ``fabula approve RUN``: the writer's gate.

With ``--review`` (or ``--review-every K``) a run stops after each committed chapter (every K) in review,
and before the first chapter with its outline; ``fabula approve RUN`` records the approval and writes on
(to the next review); ``fabula revise`` and ``fabula edit`` change the chapter first. The records are
``agent.store.writer.review``'s; ``runs``, ``show`` and the view say "in review" with the commands to go on.
"""

from __future__ import annotations

import argparse
from typing import Any

from agent.cli.errors import CLIError
from agent.errors import InputError
from agent.store import RunStore
from agent.store.writer.review import MAX_EVERY, describe, in_review, next_steps, review_every, set_review, with_start
from agent.userinput import whole_number

REVIEW_HELP = (
    "stop after each committed chapter, and after the outline, for the writer: fabula approve RUN writes "
    "on; fabula revise / edit change the chapter first"
)
REVIEW_EVERY_HELP = "review every K chapters (and the outline first); implies --review"


DRAFTS_HELP = (
    "best of N: N drafts of each chapter (at once on a server), one chosen (inside the gate, then the "
    "lowest lint score, then nearest the target); the others kept for fabula revise RUN --chapter K "
    "--use-draft D"
)
DRAFTS_JUDGE_HELP = (
    "with --drafts: the run's own model chooses among the drafts (one call comparing them with the "
    "state before the chapter and its outline item; its one-line reason kept); else the rule"
)


def add_drafts_options(parser: argparse.ArgumentParser) -> None:
    """``--drafts N``, ``--drafts-judge`` and ``--lint-avoid``: every NstAgent door that writes chapters."""
    parser.add_argument("--drafts", metavar="N", help=DRAFTS_HELP)
    parser.add_argument("--drafts-judge", action="store_true", help=DRAFTS_JUDGE_HELP)
    parser.add_argument("--lint-avoid", action="store_true", help=LINT_AVOID_HELP)


def drafts_setting(args: argparse.Namespace) -> dict[str, Any]:
    """The plan record ``--drafts N [--drafts-judge]`` asks for (empty when not given); a bad N is one line,
    exit 2."""
    n = getattr(args, "drafts", None)
    judge = getattr(args, "drafts_judge", False)
    if n is None:
        if judge:
            raise CLIError("--drafts-judge chooses among drafts: give --drafts N too")
        return {}
    from agent.nst.best_of.runner import DRAFTS_KEY
    from grammars.drafts import MAX_DRAFTS

    try:
        n = whole_number(n, low=1, high=MAX_DRAFTS, what="--drafts")
    except InputError as exc:
        raise CLIError(str(exc)) from None
    return {DRAFTS_KEY: {"n": n, **({"judge": True} if judge else {})}}


LINT_AVOID_HELP = (
    "name the book's worst offenders so far (fabula lint: stock phrases, overused words) as 'avoid' "
    "in each chapter's prompt (default profile only)"
)


def lint_avoid_setting(args: argparse.Namespace, profile: str | None) -> dict[str, Any]:
    """The plan record ``--lint-avoid`` asks for (empty when not given); refused under another profile."""
    if not getattr(args, "lint_avoid", False):
        return {}
    from agent.nst.chapter.avoid import LINT_AVOID_KEY, check_profile

    try:
        check_profile(profile)
    except InputError as exc:
        raise CLIError(str(exc)) from None
    return {LINT_AVOID_KEY: True}


def add_review_option(parser: argparse.ArgumentParser, *, off: bool = False) -> None:
    """``--review`` is a plain flag (so ``fabula resume --review RUN`` reads RUN as the run), ``--review-every K``
    its period; the first spelling, ``--review every=K``, is rewritten to it by :func:`old_review_spelling`."""
    parser.add_argument("--review", action="store_true", help=REVIEW_HELP)
    parser.add_argument("--review-every", metavar="K", help=REVIEW_EVERY_HELP)
    if off:
        parser.add_argument("--no-review", action="store_true", help="stop reviewing: write on to the end")


def old_review_spelling(argv: list[str]) -> list[str]:
    """``--review every=K`` (the first documented spelling) as ``--review-every K``."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] == "--review" and arg.startswith("every="):
            out[-1:] = ["--review-every", arg.removeprefix("every=")]
        else:
            out.append(arg)
    return out


def review_of(args: argparse.Namespace) -> dict[str, Any] | None:
    """The review setting the flags ask for (None: not given); bad values are one line, exit 2."""
    every = getattr(args, "review_every", None)
    if every is None:
        return review_every(1) if getattr(args, "review", False) else None
    try:
        return review_every(whole_number(every, low=1, high=MAX_EVERY, what="--review-every"))
    except InputError as exc:
        raise CLIError(str(exc)) from None


def apply_review(store: RunStore, args: argparse.Namespace) -> None:
    """``--review`` turns review on for the run, ``--no-review`` off; neither leaves it as it is
    (``--drafts N``, where the command has it, is stored the same way)."""
    for key, value in {**drafts_setting(args), **lint_avoid_setting(args, store.info().config.get("profile"))}.items():
        store.plans.put(key, _from_here(store, key, value))
    if getattr(args, "no_review", False):
        set_review(store, None)
        return
    review = review_of(args)
    if review is not None:
        set_review(store, with_start(store, review))


def _from_here(store: RunStore, key: str, value: Any) -> Any:
    """``--drafts`` given to a run with chapters: the drafts begin at its next chapter (those written already
    are never redrafted); once on, they keep where they began (a resume that repeats the flag redrafts
    nothing)."""
    from agent.nst.best_of.runner import DRAFTS_KEY

    if key != DRAFTS_KEY:
        return value
    before = store.plans.get(DRAFTS_KEY)
    start = before.get("from", 1) if isinstance(before, dict) else store.info().last_unit + 1
    return {**value, "from": start}


def review_lines(store: RunStore, run_dir: str) -> list[str]:
    """What a run in review says (empty when it is not): where it waits and the commands to go on."""
    waiting = in_review(store)
    if waiting is None:
        return []
    return [f"{run_dir}: {describe(waiting)}", *(f"  next: {line}" for line in next_steps(run_dir, waiting))]


def refuse_in_review(store: RunStore, run_dir: str) -> None:
    """A run in review goes on only by ``fabula approve`` (a plain resume would skip the writer)."""
    waiting = in_review(store)
    if waiting is not None:
        raise CLIError(
            f"{run_dir} is {describe(waiting)}; go on with fabula approve {run_dir} (or revise or edit it first)",
            exit_code=1,
        )
