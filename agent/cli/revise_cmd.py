"""``fabula revise RUN --chapter N --note "..."``: the model rewrites a chapter following the writer's note.

Also ``--notes FILE`` (several chapters, one note each), ``--version K`` (restore version K as the newest:
nothing is ever overwritten), ``--resume`` (finish a revision that was interrupted) and ``--reconcile``
(then re-derive the later chapters' states and list what contradicts them, as ``fabula reconcile``). The
work is ``agent.nst.revise.rewrite``'s; the view's Revise button runs the same function.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from agent.cli.errors import CLIError
from agent.cli.options import add_model_options, choose_model, open_client
from agent.cli.rundir import open_run, store_errors
from agent.errors import InputError
from agent.store import RunStore, StoreError
from agent.store.writer.versions import changed_words, word_diff

DIFF_CONTEXT_WORDS = 8
"""Unchanged words shown either side of a change in the printed diff."""


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "revise",
        help="the model rewrites a chapter following your note (a new version)",
        description="Rewrite a committed chapter of an NstAgent run following a note, with "
        "the context it was written with (the state before it, the outline, a search of "
        "earlier chapters) and under the same length gate. The result is the chapter's next "
        "version (every version is kept; --version K restores one), the chapter's state is "
        "re-derived, and later chapters are marked stale (--reconcile re-derives them).",
    )
    parser.add_argument("run_dir", metavar="RUN", help="the run directory")
    parser.add_argument("--chapter", type=int, metavar="N", help="the chapter to revise")
    parser.add_argument("--step", type=int, metavar="N", help="a Magnet run: the step whose paragraph to revise")
    parser.add_argument(
        "--paragraph", type=int, default=1, metavar="J", help="--step: which of the step's paragraphs (default 1)"
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--note", metavar="TEXT", help="what to change, in your words")
    what.add_argument(
        "--notes",
        metavar="FILE",
        type=Path,
        help="several chapters: lines 'N: note' (a line without a number continues the note)",
    )
    what.add_argument("--version", type=int, metavar="K", help="restore version K of the chapter (as a new version)")
    what.add_argument("--resume", action="store_true", help="finish a revision that was interrupted")
    what.add_argument(
        "--use-draft",
        type=int,
        metavar="K",
        help="choose draft K of the chapter (written with --drafts N) as its next version",
    )
    parser.add_argument(
        "--reconcile",
        action="store_true",
        help="then reconcile: re-derive the later chapters' states, list contradictions",
    )
    parser.add_argument("--no-diff", action="store_true", help="do not print the word diff")
    add_model_options(parser, stored="RUN")
    parser.set_defaults(handler=run)


_NUMBERED = re.compile(r"^\s*(?:chapter\s+)?(\d+)\s*[:.)-]\s*(.*)$", re.IGNORECASE)


def parse_notes(text: str) -> list[tuple[int, str]]:
    """``(chapter, note)`` pairs from lines ``N: note`` (a following unnumbered line continues the note)."""
    notes: list[tuple[int, str]] = []
    for line in text.splitlines():
        match = _NUMBERED.match(line)
        if match:
            notes.append((int(match.group(1)), match.group(2).strip()))
        elif line.strip() and not line.lstrip().startswith("#"):
            if not notes:
                raise CLIError(
                    f"--notes: the first note has no chapter number: {line.strip()[:60]!r} (write 'N: note')"
                )
            notes[-1] = (notes[-1][0], f"{notes[-1][1]} {line.strip()}".strip())
    if not notes:
        raise CLIError("--notes: no note in the file (write one line 'N: note' per chapter)")
    return notes


def diff_lines(old: str, new: str) -> list[str]:
    """The word diff, ``[-removed-]`` and ``{+added+}``, long unchanged stretches cut to their ends."""
    out: list[str] = []
    for op, text in word_diff(old, new):
        flat = " ".join(text.split())
        if op == "same":
            words = flat.split(" ")
            if len(words) > 2 * DIFF_CONTEXT_WORDS:
                flat = " ".join(words[:DIFF_CONTEXT_WORDS]) + " … " + " ".join(words[-DIFF_CONTEXT_WORDS:])
            out.append(flat)
        elif op == "del":
            out.append(f"[-{flat}-]")
        else:
            out.append(f"{{+{flat}+}}")
    return [" ".join(part for part in out if part)]


def _notes(args: argparse.Namespace) -> list[tuple[int, str]]:
    from agent.nst.revise.rewrite import check_note

    if args.notes is not None:
        try:
            text = args.notes.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CLIError(f"cannot read --notes {args.notes}: {exc}") from exc
        pairs = parse_notes(text)
        if args.chapter is not None:
            pairs = [(n, note) for n, note in pairs if n == args.chapter]
    else:
        if args.chapter is None:
            raise CLIError("give --chapter N with --note (or --notes FILE)")
        pairs = [(args.chapter, args.note)]
    try:
        return [(n, check_note(note)) for n, note in pairs]
    except InputError as exc:
        raise CLIError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    from agent import pipelines
    from agent.nst.revise.rewrite import check_revisable, pending

    if args.note is None and args.notes is None and args.version is None and not args.resume and args.use_draft is None:
        raise CLIError("say what to do: --note TEXT, --notes FILE, --version K, --use-draft K or --resume")
    with open_run(args.run_dir, readonly=False) as store:
        if store.live_status() == "running":
            raise CLIError(f"{args.run_dir} is being written; revise it once it stops", exit_code=1)
        if store.info().unit_kind == "step" or args.step is not None:
            return revise_step(store, args)
        record = pending(store)
        if args.resume:
            if record is None:
                raise CLIError(f"{args.run_dir} has no unfinished revision")
            jobs = [(int(record["chapter"]), str(record["note"]))]
        elif args.version is not None or args.use_draft is not None:
            jobs = []
        else:
            jobs = _notes(args)
        if record is not None and not args.resume and jobs and jobs[0] != (record["chapter"], record["note"]):
            raise CLIError(
                f"a revision of chapter {record['chapter']} is unfinished; finish it first: "
                f"fabula revise {args.run_dir} --resume",
                exit_code=1,
            )
        try:
            for n, _ in jobs or [(args.chapter, "")]:
                if n is None:
                    raise CLIError("give --chapter N")
                check_revisable(store, n)
        except (InputError, StoreError) as exc:
            raise CLIError(str(exc)) from None
        llm = choose_model(args, stored=pipelines.stored_model(store))
        options, model = open_client(llm)
        try:
            if args.version is not None:
                first = restore(store, args.chapter, args.version, options, model)
            elif args.use_draft is not None:
                first = choose_draft(store, args.chapter, args.use_draft, options, model)
            else:
                first = min(n for n, _ in jobs)
                for n, note in jobs:
                    revise_one(store, args, n, note, options, model)
        finally:
            model.close()
        last = store.info().last_unit
        if args.reconcile and first < last:
            from agent.cli.reconcile_cmd import finish
            from agent.nst.revise.reconcile import prepare

            try:
                pending_reconcile = prepare(store, start=first, lock=[])
            except (InputError, StoreError) as exc:
                raise CLIError(str(exc)) from None
            return finish(store, args.run_dir, pending_reconcile, llm)
        if first < last:
            later = f"chapter {last} was" if first + 1 == last else f"chapters {first + 1}-{last} were"
            print(
                f"{later} written before the revision and marked stale; fabula reconcile {args.run_dir} "
                "re-derives their states and lists what contradicts the revision",
                file=sys.stderr,
            )
    return 0


def revise_one(store: RunStore, args: argparse.Namespace, index: int, note: str, options, model) -> None:
    from agent import pipelines
    from agent.nst.revise.rewrite import revise

    old = store.chapter(index)
    assert old is not None
    print(f"fabula: revising chapter {index} with {options.describe()}: {note[:80]}", file=sys.stderr)
    with store_errors(), pipelines.on_unit(store, index, "revise", llm=options, model=model) as ctx:
        try:
            done = revise(ctx, index, note)
        except InputError as exc:
            raise CLIError(str(exc)) from None
    new = store.chapter(index)
    assert new is not None
    _report(
        args,
        index,
        done.old_version,
        old.text if not done.resumed else _version_text(store, index, done.old_version),
        new.text,
        new.version,
        done.words,
        done.rederived.what,
        (f"; the closest draft was kept ({done.reason})" if done.degraded else ""),
    )


def _version_text(store: RunStore, index: int, version: int) -> str:
    from agent.store.writer.versions import chapter_versions

    return next((v.text for v in chapter_versions(store, index) if v.number == version), "")


def _report(
    args: argparse.Namespace,
    index: int,
    old_version: int,
    old: str,
    new: str,
    version: int,
    words: int,
    state: str,
    degraded: str,
) -> None:
    removed, added = changed_words(word_diff(old, new))
    print(
        f"chapter {index}: stored version {version} ({words} words; {removed} words removed, {added} added); "
        f"version {old_version} is kept{degraded}",
        file=sys.stderr,
    )
    print(state, file=sys.stderr)
    if not args.no_diff:
        print(f"--- chapter {index} version {old_version}\n+++ chapter {index} version {version}")
        print("\n".join(diff_lines(old, new)))


def restore(store: RunStore, index: int | None, version: int, options, model) -> int:
    """Version ``version`` of chapter ``index`` stored again as its newest version; its state re-derived."""
    from agent import pipelines
    from agent.store.writer.edit import mark_stale
    from agent.store.writer.review import record_action
    from agent.store.writer.versions import chapter_versions

    if index is None:
        raise CLIError("give --chapter N with --version K")
    versions = {v.number: v for v in chapter_versions(store, index)}
    if version not in versions:
        raise CLIError(f"chapter {index} has versions {', '.join(map(str, sorted(versions)))}; no version {version}")
    current = store.chapter(index)
    assert current is not None
    if current.version == version:
        print(f"chapter {index} is at version {version} already; nothing stored", file=sys.stderr)
        return index
    with store_errors():
        chapter = store.revise_chapter(
            index, versions[version].text, title=versions[version].title, reason=f"restore version {version}"
        )
        mark_stale(store, index, what=f"chapter {index} restored to version {version}", state_rederived=False)
    result = pipelines.rederive(store, index, llm=options, model=model)
    with store_errors():
        mark_stale(store, index, what=f"chapter {index} restored to version {version}", state_rederived=result.ok)
        record_action(store, "restore", unit=index, version=chapter.version, restored=version)
    print(
        f"chapter {index}: version {version} restored as version {chapter.version}; version {current.version} is kept",
        file=sys.stderr,
    )
    print(result.what, file=sys.stderr)
    return index


def choose_draft(store: RunStore, index: int, k: int, options, model) -> int:
    """Draft ``k`` of chapter ``index`` (``--drafts N``) stored as its next version; its state re-derived."""
    from agent import pipelines
    from agent.nst.best_of.runner import use_draft
    from agent.store.writer.edit import mark_stale
    from agent.store.writer.review import record_action

    old = store.chapter(index)
    assert old is not None
    with store_errors(), pipelines.on_unit(store, index, "revise", llm=options, model=model) as ctx:
        try:
            version, rederived = use_draft(ctx, index, k)
        except InputError as exc:
            raise CLIError(str(exc)) from None
        mark_stale(
            store, index, what=f"chapter {index}: draft {k} chosen (version {version})", state_rederived=rederived.ok
        )
        record_action(store, "use-draft", unit=index, version=version, draft=k)
    print(f"chapter {index}: draft {k} stored as version {version}; version {old.version} is kept", file=sys.stderr)
    print(rederived.what, file=sys.stderr)
    return index


def revise_step(store: RunStore, args: argparse.Namespace) -> int:
    """A Magnet run: one paragraph of ``--step N`` rewritten from ``--note`` (``agent.magnet.revise``)."""
    from agent import pipelines
    from agent.magnet.revise import revise_paragraph
    from agent.nst.revise.rewrite import check_note

    if store.info().unit_kind != "step":
        raise CLIError(f"{args.run_dir} is a run of chapters; use --chapter")
    if args.step is None or args.note is None:
        raise CLIError("a Magnet run: give --step N and --note TEXT (optionally --paragraph J)")
    try:
        note = check_note(args.note)
    except InputError as exc:
        raise CLIError(str(exc)) from None
    options, model = open_client(choose_model(args, stored=pipelines.stored_model(store)))
    try:
        with store_errors(), pipelines.on_unit(store, args.step, "revise", llm=options, model=model) as ctx:
            try:
                new, old = revise_paragraph(ctx, args.step, note, paragraph=args.paragraph)
            except InputError as exc:
                raise CLIError(str(exc)) from None
    finally:
        model.close()
    print(
        f"step {args.step} paragraph {args.paragraph}: revised ({new.words} words); the old text is kept as a "
        "version; the world state is not re-derived from the text (set it with fabula edit --step --var)",
        file=sys.stderr,
    )
    if not args.no_diff:
        print("\n".join(diff_lines(old, new.text)))
    return 0
