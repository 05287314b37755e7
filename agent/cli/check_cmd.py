"""``fabula check FILE [--out RUN]``: a private consistency check of a manuscript in one command.

Import (``fabula import``), then the consistency judge (``fabula eval consistency``, every
chapter in scope unless ``--window-chapters`` narrows it), then a report on stdout: each
contradiction with its two quotes and their chapters, whether the quotes were found in the text,
and how to see them linked to the passages (``fabula view``). The judge runs where the writer
says (the embedded model by default, or a local server): the manuscript goes nowhere else.
Checking the same file again into the same run reuses the import and the stored judgments
(only what is missing is asked).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from agent.cli.checks import bounded_int
from agent.cli.errors import CLIError
from agent.cli.rundir import open_run, store_errors


def add_parser(sub) -> None:
    from agent.cli.eval_cmd import _judge_options
    from agent.manuscript.reading import FORMATS

    parser = sub.add_parser(
        "check",
        help="check a manuscript for contradictions, privately: import, judge, report",
        description="Import FILE as a run, judge its consistency (five category judgments, "
        "every chapter in scope) with a local judge, and print the contradictions found, each "
        "with its quotes and chapters. fabula view RUN shows them linked to the text.",
    )
    parser.add_argument("file", metavar="FILE", help="the manuscript: .txt, .md, .epub or .docx")
    parser.add_argument(
        "-o",
        "--out",
        metavar="RUN",
        help="the run folder to make (default: FILE's name with "
        "'-check', beside it); an earlier check of the same file there is reused",
    )
    parser.add_argument("--split", metavar="REGEX", help="start a chapter at every line REGEX matches")
    parser.add_argument("--format", choices=FORMATS, default="auto", help="how to read FILE (default: by its suffix)")
    parser.add_argument(
        "--window-chapters",
        type=int,
        metavar="K",
        help="report only contradictions whose later half is in the last K chapters (default: all)",
    )
    parser.add_argument(
        "--span-words",
        type=bounded_int(100, 10_000_000),
        metavar="W",
        help="judge the book in consecutive spans of chapters of at most W words, each on its own "
        "(default: the whole book in each call, or spans sized to the judge's context when the "
        "book does not fit it)",
    )
    parser.add_argument(
        "--bible",
        metavar="BIBLE",
        help="a story bible (TOML, YAML or Markdown): the book is also "
        "judged against it (the judges read the bible after the last chapter, as the writer's canon)",
    )
    _judge_options(parser)
    parser.set_defaults(handler=run)


def default_out(path: Path) -> str:
    return str(path.with_name(path.stem + "-check"))


def _earlier_check(out: str, sha256: str) -> bool:
    """True when ``out`` already holds an import of this very file (a check run again)."""
    from agent.manuscript.kind import NAME

    if not (Path(out) / "run.db").exists():
        return False
    with open_run(out) as store:
        info = store.info()
        same = info.pipeline == NAME and info.config.get("sha256") == sha256
    if not same:
        raise CLIError(f"--out {out} already holds another run; give a new folder")
    return True


def _import(args: argparse.Namespace, path: Path, out: str) -> None:
    from agent.manuscript.importer import check_out, source_config, write_run
    from agent.manuscript.read_text import checked_size
    from agent.manuscript.reading import read_manuscript

    checked_size(path)
    manuscript = read_manuscript(path, split=args.split, fmt=args.format)
    config = source_config(path, manuscript, args.split)
    if _earlier_check(out, config["sha256"]):
        print(f"fabula: {out} already holds this file's import; judging what is missing", file=sys.stderr)
        return
    with store_errors():
        check_out(out)
    for note in manuscript.notes:
        print(f"fabula: {note}", file=sys.stderr)
    with store_errors():
        write_run(manuscript, out, config)
    print(f"imported {len(manuscript.pieces)} chapters, {manuscript.words} words into {out}", file=sys.stderr)


@dataclass
class Verdict:
    """One judge's result as the report tells it: its contradictions, and how many of its category
    judgments of the current text are complete (``failed`` names the categories that are not)."""

    judge: str
    instances: list
    complete: int
    total: int
    failed: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    """Why the failed judgments failed, as stored (each distinct reason once)."""

    @property
    def whole(self) -> bool:
        return self.complete == self.total


def scores_of(store, story, spanned: set[str]) -> list[Verdict]:
    """One verdict per judge of the current text: the span judgments of the judges in ``spanned``
    (every span of the current text), else its latest complete whole-book judgment, else its latest
    partial one (what was judged is still reported)."""
    from agent.eval.ced import consistency_scores
    from agent.eval.consistency import KIND, SPAN
    from agent.store import judgments as stored
    from grammars.judges import CATEGORIES

    current = [s for s in consistency_scores(store, story) if s.current]  # complete and latest first
    errors = [j for j in stored.select(store, KIND) if not j.ok]
    out: list[Verdict] = []
    for judge in dict.fromkeys(s.judge for s in current):
        if judge in spanned:
            groups = [s for s in current if s.judge == judge and f"|{SPAN}=" in s.protocol]
        else:
            groups = [s for s in current if s.judge == judge and f"|{SPAN}=" not in s.protocol][:1]
        if not groups:
            continue
        total = len(CATEGORIES) * len(groups)
        failed = sorted({c for s in groups for c in [*s.failed, *s.missing]})
        done = total - sum(len(s.failed) + len(s.missing) for s in groups)
        protocols = {s.protocol for s in groups}
        reasons = dict.fromkeys(
            (j.error or j.status).splitlines()[0][:200]
            for j in errors
            if j.judge == judge and j.protocol in protocols and j.item in failed
        )
        out.append(Verdict(judge, [i for s in groups for i in s.instances], done, total, failed, list(reasons)))
    return out


def report(store, story, out: str, spanned: set[str] | None = None) -> list[str]:
    """The report's lines: per judge, how much was judged and each contradiction with its quotes and chapters."""
    from agent.eval.consistency import CATEGORY_NAMES

    lines = [f"# Consistency check of {out} ({len(story.sections)} chapters, {story.words} words)"]
    verdicts = scores_of(store, story, spanned or set())
    if not any(v.complete for v in verdicts):
        why = "; ".join(r for v in verdicts for r in v.reasons)
        return [
            *lines,
            "",
            "Nothing was judged: every judgment failed"
            + (f" ({why})" if why else "")
            + "; fabula check again asks them again.",
        ]
    for v in verdicts:
        verified = [i for i in v.instances if i.verified]
        per = 10_000 * len(verified) / max(story.words, 1)
        head = (
            f"## Judge {v.judge}: {len(v.instances)} contradiction(s), {len(verified)} with both quotes found "
            f"in the text ({per:.2f} per 10,000 words)"
        )
        if not v.whole:
            names = ", ".join(CATEGORY_NAMES.get(c, c) for c in v.failed)
            why = f" ({'; '.join(v.reasons)})" if v.reasons else ""
            head += (
                f"; {v.complete} of {v.total} judgments complete, not judged: {names}{why}; fabula check "
                "again asks only those"
            )
        if v.judge in (spanned or set()):
            head += "; judged in spans of chapters, each on its own"
        lines += ["", head]
        for n, inst in enumerate(v.instances, start=1):
            r = inst.reply
            lines += [
                "",
                f"{n}. {CATEGORY_NAMES[inst.category]}: {inst.subtype.replace('_', ' ')}"
                + ("" if inst.verified else f" (unverified: {inst.problem})"),
                f'   {_where(story, r.get("quote_chapter"))}: "{r.get("exact_quote")}"',
                f'   {_where(story, r.get("contradicting_chapter"))}: "{r.get("contradicting_quote")}"',
                f"   {r.get('explanation', '')}",
            ]
        if not v.instances:
            lines += ["", "No contradiction found" + ("." if v.whole else " in what was judged.")]
    lines += ["", f"The quotes, linked to the passages: fabula view {out} (the Judgments page)"]
    return lines


def _judge(args: argparse.Namespace, store, story, judge, out: str) -> tuple[int, bool]:
    """One judge over the book: whole, or in spans (asked, or when the book does not fit the
    judge's context). Returns the failed judgments and whether spans were used."""
    from agent.cli.eval_cmd import _line
    from agent.eval.consistency import fits, judge_consistency, judge_spans, span_words, story_tokens

    words = args.span_words
    if words is None and fits(story, judge) is False:
        words = span_words(judge)
        print(
            f"fabula: the book (about {story_tokens(story)} tokens) does not fit the judge's context "
            f"({judge.budget().context} tokens) in one call: judged in spans of at most {words} words, each "
            "on its own (a contradiction between two spans is not found)",
            file=sys.stderr,
        )
    if words is not None:
        failed = 0
        for (first, last), counts in judge_spans(store, story, judge, max_words=words):
            failed += counts["failed"]
            print(_line(out, counts) + f" [{judge.label}; span: chapters {first}-{last}]", file=sys.stderr)
        return failed, True
    window, counts = judge_consistency(store, story, judge, window_chapters=args.window_chapters or len(story.sections))
    print(
        _line(out, counts) + f" [{judge.label}; chapters {window.first}-{len(story.sections)} in scope]",
        file=sys.stderr,
    )
    return counts["failed"], False


def with_bible(path: str):
    """A function that puts the bible at ``path`` after a story's last chapter (read and checked now), so
    the consistency judges find a chapter that contradicts the writer's canon as they find two chapters
    that contradict each other, each with its quotes."""
    from dataclasses import replace

    from agent.bible.seed import canon_text
    from agent.cli.voice_inputs import story_bible
    from agent.eval.story import Section
    from agent.text import count_words

    text = canon_text(story_bible(path))

    def append(story):
        index = max((s.index for s in story.sections), default=0) + 1
        bible = Section(index, BIBLE_TITLE, text, count_words(text))
        return replace(story, sections=[*story.sections, bible])

    return append


BIBLE_TITLE = "Story bible (the writer's canon)"
"""The title of the section a ``--bible`` adds after the last chapter (the judges' chapter numbers start at 1)."""


def _where(story, chapter) -> str:
    """How the report names a judged section: ``chapter N``, or ``the story bible``."""
    named = {s.index: s.title for s in story.sections}
    return "the story bible" if named.get(chapter) == BIBLE_TITLE else f"chapter {chapter}"


def run(args: argparse.Namespace) -> int:
    from agent.cli.eval_cmd import _close, open_judges
    from agent.eval.story import load_story

    path = Path(args.file)
    if args.window_chapters is not None and args.window_chapters < 1:
        raise CLIError("--window-chapters must be at least 1")
    if args.window_chapters is not None and args.span_words is not None:
        raise CLIError("--window-chapters and --span-words do not go together (a span's chapters are all in scope)")
    out = args.out or default_out(path)
    canon = with_bible(args.bible) if args.bible else None  # checked before anything is created
    _import(args, path, out)
    judges = open_judges(args)
    failed = 0
    spanned: set[str] = set()
    try:
        with open_run(out, readonly=False) as store:
            story = load_story(store)
            if canon is not None:
                story = canon(story)
            for judge in judges:
                n, in_spans = _judge(args, store, story, judge, out)
                failed += n
                if in_spans:
                    spanned.add(judge.label)
            print("\n".join(report(store, story, out, spanned)))
    finally:
        _close(judges)
    return 1 if failed else 0
