"""The one next step a command prints when it ends a book: read it, or send it.

Every command that can complete a run (write, resume, continue, sequel, fork) ends with this line,
so a writer never has to guess the command that comes after a finished book. A failure's next
step (``fabula resume RUN``) is printed where the failure is reported (``agent.cli.rundir``,
``agent.cli.__init__``).
"""

from __future__ import annotations

from pathlib import Path

EXPORT_EXAMPLE = "book.docx"
"""The file the export hint names: the manuscript a writer sends."""


def book_done(run_dir: str | Path) -> str:
    """The next step after a completed book."""
    return f"next: read it: fabula view {run_dir} · export it: fabula export {run_dir} -o {EXPORT_EXAMPLE}"


def print_if_done(run_dir: str | Path, status: str) -> None:
    """Print :func:`book_done` when ``status`` says the book is completed."""
    if status == "completed":
        print(book_done(run_dir))
