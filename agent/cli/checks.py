"""Checks every command shares, so that one rule holds at every door.

- :func:`finite`: the argparse type of every floating-point flag (``prompt --temperature``,
  ``view --poll``, ``watch --interval``, ``write magnet --pages``...): a finite number in its
  range, else argparse's one-line usage error.
- :func:`bounded_int`: the same for integer flags (``eval compare --resamples``,
  ``eval inject --controls``).
- :func:`output_dir`: a folder a command will write, checked before any work
  (:func:`agent.store.paths.check_output_dir`), as a one-line :class:`CLIError`.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path

from agent.cli.errors import CLIError


def finite(low: float, high: float, *, low_open: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite float in ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    shown = f"{'more than' if low_open else 'between'} {low:g}{'' if low_open else f' and {high:g}'}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        inside = (low < value if low_open else low <= value) and value <= high
        if not math.isfinite(value) or not inside:
            raise argparse.ArgumentTypeError(f"must be {shown}{f' (at most {high:g})' if low_open else ''}, got {text}")
        return value

    parse.__name__ = "number"  # argparse names the type in its messages
    return parse


def server_url(text: str) -> str:
    """An argparse ``type`` for ``--endpoint``/``--judge-endpoint``: a URL, never empty (an empty flag
    used to be taken as "not given" and the configured server used instead)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give the server's URL (http://HOST:PORT/v1)")
    return text.strip()


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``[low, high]``."""

    def parse(text: str) -> int:
        from agent.errors import InputError
        from agent.userinput import whole_number

        try:
            return whole_number(text, low=low, high=high, what="it")
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix("it ")) from None

    parse.__name__ = "integer"
    return parse


def output_dir(path: str | os.PathLike[str], *, flag: str = "--out") -> Path:
    """``path`` resolved if a command can make and write the folder there; one line otherwise."""
    from agent.store.errors import StoreError
    from agent.store.paths import check_output_dir

    try:
        return check_output_dir(path, what=flag)
    except StoreError as exc:
        raise CLIError(str(exc)) from exc


def cannot_write(path: str | os.PathLike[str], exc: OSError) -> CLIError:
    """The one line for a file that could not be written: a full disk says so (nothing committed is lost)."""
    import errno

    from agent.cli.errors import DISK_FULL

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return CLIError(f"{DISK_FULL} (writing {path})", exit_code=1)
    return CLIError(f"cannot write {path}: {exc.strerror or exc}", exit_code=1)
