"""How the CLI turns fabula's own failures into one line, and anything else into a bug report.

Only fabula's error types (``agent.errors.FabulaError`` and its subclasses in every layer, the
CLI's own :class:`CLIError`, the launcher's errors) become ``fabula: error: ...`` with exit 2
(bad input) or 1 (the run failed). Any other exception is a bug in fabula: it is reported as
``fabula: internal error: ...`` with the path of a log holding the traceback, never as a
message that blames the user's input.
"""

from __future__ import annotations

import errno
import sqlite3
import time
import traceback
from pathlib import Path

from agent.errors import FabulaError


class CLIError(FabulaError):
    """A user-facing error with its exit code (2: bad input, 1: failure while working)."""

    def __init__(self, message: str, exit_code: int = 2, *, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.details = details or []
        """Lines printed under the error line (e.g. one per refused pair); the error itself is one line."""


def describe(exc: BaseException) -> tuple[str, int] | None:
    """``(one line, exit code)`` for one of fabula's own errors; ``None`` for a bug."""
    from agent.weights.models import ModelUnavailableError
    from serve.launcher import ServeError

    if isinstance(exc, FabulaError):
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        if getattr(exc, "one_line_per_problem", False):  # e.g. every problem of a story definition
            return "\nfabula: error: ".join(lines), exc.exit_code
        details = getattr(exc, "details", None) or []
        return "\n".join([lines[0], *details]), exc.exit_code
    if isinstance(exc, ServeError | ModelUnavailableError):
        return str(exc), 1
    if isinstance(exc, sqlite3.DatabaseError):
        return database_error(exc), 1
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DISK_FULL + (f" (writing {exc.filename})" if exc.filename else ""), 1
    if isinstance(exc, OSError) and exc.errno in _FILE_SYSTEM_ERRORS and exc.filename is not None:
        # a path fabula was told to use and cannot: the file system's answer, not a bug
        return f"cannot use {exc.filename}: {exc.strerror}", 1
    return None


def database_error(exc: sqlite3.DatabaseError) -> str:
    """The one line for an SQLite failure, by its cause: another process, a read-only file system, a
    full disk, else damage (every command says the same for the same cause)."""
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return f"the run is locked by another process ({exc}); try again when it is done"
    if "readonly" in text or "read-only" in text:
        return f"the run is on a read-only file system ({exc}); show, search and export work there, writing does not"
    if "database or disk is full" in text:
        return DISK_FULL
    return f"the run database is damaged or unreadable: {exc}"


DISK_FULL = (
    "the disk is full; nothing already committed was lost (free some space, then run the same command "
    "again or fabula resume the run)"
)
_FILE_SYSTEM_ERRORS = {
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EROFS,
    errno.EACCES,
    errno.EPERM,
    errno.ENAMETOOLONG,
    errno.ENOTDIR,
    errno.EISDIR,
    errno.ENOENT,
    errno.EEXIST,
    errno.ELOOP,
    errno.EXDEV,
    errno.EBUSY,
    errno.ETXTBSY,
    errno.EMLINK,
    errno.ENXIO,
    errno.ENODEV,
}


def log_internal_error(exc: BaseException) -> Path | None:
    """Write the traceback to ``$FABULA_HOME/logs/internal-<time>.log``; its path, or None if unwritable."""
    from agent.weights.home import fabula_home

    try:
        folder = fabula_home() / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"internal-{time.strftime('%Y%m%d-%H%M%S')}-{id(exc) % 10000:04d}.log"
        path.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
        return path
    except OSError:
        return None
