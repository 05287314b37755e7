"""Run-directory paths: resolved once, and nothing written outside the run directory."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from agent.store.errors import NotARunError, RunNotFoundError, StoreError

DB_NAME = "run.db"
LOCK_NAME = "run.lock"
_DB_COMPANIONS = ("run.db", "run.db-wal", "run.db-shm", "run.db-journal", LOCK_NAME)


def resolve_run_dir(path: str | os.PathLike[str]) -> Path:
    """The existing run directory at ``path``, resolved; raises if it holds no run."""
    given = Path(path).expanduser()
    if not given.exists():
        raise RunNotFoundError(f"no such run directory: {given}")
    run_dir = given.resolve()
    if not run_dir.is_dir():
        raise RunNotFoundError(f"not a directory: {given}")
    db = run_dir / DB_NAME
    if not db.exists():
        raise RunNotFoundError(f"{given} is not a fabula run (no {DB_NAME} in it)")
    if not db.resolve().is_relative_to(run_dir) or not db.resolve().is_file():
        raise NotARunError(f"{db} is not a regular file inside the run directory")
    return run_dir


def new_run_dir(path: str | os.PathLike[str]) -> Path:
    """Create (or accept an empty-of-runs) directory for a new run; refuse an existing run."""
    run_dir = check_output_dir(path)
    if (run_dir / DB_NAME).exists():
        raise StoreError(f"{path} already holds a run; use `fabula resume {path}`")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder {path}: {exc.strerror or exc}") from exc
    return run_dir


NAME_MAX = 255
PATH_MAX = 4096


def check_output_dir(path: str | os.PathLike[str], *, what: str = "output folder") -> Path:
    """A folder a command will write into, checked before any work: it is a folder or can be made
    one (every existing part of the path is a folder, no name is too long, the nearest existing
    folder accepts a new entry: not read-only, not /proc, not another user's). Creates nothing;
    returns the path resolved. Every command that writes a folder checks it here."""
    shown = str(path)
    if not shown.strip():
        raise StoreError(f"the {what} is empty")
    try:
        target = Path(path).expanduser().resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise StoreError(f"{what} {shown}: not a usable path ({exc})") from exc
    if len(os.fsencode(target)) > PATH_MAX or any(len(os.fsencode(p)) > NAME_MAX for p in target.parts):
        raise StoreError(
            f"{what} {shown[:80]}...: a name in it is longer than {NAME_MAX} bytes (or the path than {PATH_MAX})"
        )
    existing = target
    while not existing.exists():
        if existing.is_symlink():
            raise StoreError(f"{what} {shown}: {existing} is a dangling link")
        existing = existing.parent
    if not existing.is_dir():
        where = "is" if existing == target else f"is under {existing}, which is"
        raise StoreError(f"{what} {shown} {where} a file, not a folder")
    if existing == target and (target / DB_NAME).exists():
        return target  # the caller says what it does with an existing run
    try:  # the only test that answers for read-only mounts, /proc, ACLs and quotas alike
        probe = tempfile.mkdtemp(dir=existing, prefix=".fabula-probe-")
    except OSError as exc:
        raise StoreError(f"{what} {shown}: cannot write in {existing} ({exc.strerror or exc})") from exc
    os.rmdir(probe)
    return target


def outside_run(run_dir: Path, out: str | os.PathLike[str], *, what: str) -> Path:
    """``out`` resolved, refused when it is ``run_dir`` or inside it: a new run (a fork, book two)
    nested in the run it comes from would be copied, exported and removed with it."""
    wanted = Path(out).expanduser().resolve()
    if wanted.is_relative_to(run_dir.resolve()):
        raise StoreError(
            f"{what} must go outside the run it comes from ({out} is "
            f"{'that run' if wanted == run_dir.resolve() else 'inside it'})"
        )
    return wanted


def inside(run_dir: Path, relative: str | os.PathLike[str]) -> Path:
    """``run_dir / relative``, refused if it would land outside ``run_dir`` (``..``, links)."""
    rel = Path(relative)
    if rel.is_absolute():
        raise StoreError(f"path must be relative to the run directory: {relative}")
    target = (run_dir / rel).resolve()
    if not target.is_relative_to(run_dir.resolve()):
        raise StoreError(f"path escapes the run directory: {relative}")
    return target


def check_output_file(path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """A user-given output file, resolved: its folder must exist, it must not be a run database,
    and an existing file is replaced only with ``force`` and only if it is a regular file (never
    a device such as /dev/null, a FIFO or a socket, which an atomic rename would destroy)."""
    target = Path(path).expanduser().resolve()
    if target.is_dir():
        raise StoreError(f"output path is a directory: {path}")
    if not target.parent.is_dir():
        raise StoreError(f"output folder does not exist: {target.parent}")
    if target.name in _DB_COMPANIONS and (target.parent / DB_NAME).exists():
        raise StoreError(f"refusing to overwrite the run database: {path}")
    if target.exists() and not target.is_file():
        raise StoreError(f"refusing to replace {path}: it is not a regular file (use -o - for standard output)")
    if target.exists() and not force:
        raise StoreError(f"{path} exists; pass --force to replace it")
    return target


def write_atomic(target: Path, data: bytes) -> None:
    """Write via a temporary file in the same folder and rename: never a half-written file. The
    file keeps the mode of the one it replaces, else gets the usual mode under the umask."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, target.stat().st_mode & 0o7777 if target.is_file() else 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
