"""How the CLI turns expected failures into one line."""

from __future__ import annotations

import json


class CLIError(Exception):
    """A user-facing error with its exit code (2: bad input, 1: failure while working)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def describe(exc: Exception) -> str | None:
    """One line for an exception we expect from the libraries; ``None`` for a real bug."""
    from agent.llm.types import LLMError
    from serve.launcher import ServeError
    from serve.models import ModelUnavailableError

    if isinstance(exc, LLMError | ServeError | ModelUnavailableError):
        return str(exc).splitlines()[0] if isinstance(exc, LLMError) else str(exc)
    if isinstance(exc, KeyError):
        return str(exc.args[0]) if exc.args else "not found"
    if isinstance(exc, ValueError | json.JSONDecodeError | OSError):
        return str(exc)
    return None
