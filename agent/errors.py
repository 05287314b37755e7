"""fabula's own error types: the only exceptions the CLI turns into a one-line message.

Anything else that escapes is a bug in fabula and is reported as an internal error with the
path of a log holding the traceback (``agent.cli``), never as a message that blames the
user's input. Library layers raise subclasses of these; each says which exit code it means.
"""

from __future__ import annotations


class FabulaError(Exception):
    """An expected failure with a message a user can act on. ``exit_code``: 1, the run failed."""

    exit_code = 1


class InputError(FabulaError):
    """The user's input is wrong (a setting, a file, a flag): exit code 2, nothing was started."""

    exit_code = 2


class ConfigError(InputError):
    """A pipeline setting is unknown or out of range; the message names the setting."""
