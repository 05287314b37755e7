"""Errors the store raises; each message is one line a user can act on."""

from __future__ import annotations

from agent.errors import InputError


class StoreError(InputError):
    """Any expected failure of the run store (bad run directory, bad database, misuse)."""


class RunNotFoundError(StoreError):
    """The run directory or its database does not exist."""


class NotARunError(StoreError):
    """The file is corrupt, not SQLite, or a database of some other program."""


class SchemaTooNewError(StoreError):
    """The database was written by a newer fabula; this one must not touch it."""


class WrongPipelineError(StoreError):
    """The run belongs to a different pipeline than the caller expects."""


class RunBusyError(StoreError):
    """Another process is writing this run."""

    exit_code = 1


class ReadOnlyRunError(StoreError):
    """A command that writes was given a run on a read-only file system (it can be read, not changed)."""

    exit_code = 1


class DiskFullError(StoreError):
    """The disk holding the run is full: nothing committed is lost, nothing more can be written."""

    exit_code = 1


class CommitError(StoreError):
    """A unit could not be committed (out of order, already committed, bad data)."""

    exit_code = 1
