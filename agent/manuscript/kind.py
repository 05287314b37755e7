"""The ``imported`` run kind: a book fabula did not write, described like any pipeline.

Its runs are made by ``fabula import``, never by ``fabula write``; so it is registered in
``agent.pipelines.KINDS`` (read, shown, searched, exported) rather than offered as a writer. Its
state per chapter holds only the chapter's word count and its heading as found in the file.
"""

from __future__ import annotations

from typing import Any

from agent.errors import InputError
from agent.pipelines import Pipeline
from agent.run_context import RunContext
from agent.store.export.titles import IMPORTED_KIND

NAME = IMPORTED_KIND
VERSION = "1"


def _no_writing(ctx: RunContext[Any]) -> None:
    """An imported run is complete when it is made; there is nothing for a model to resume."""
    raise InputError("an imported run holds a book written elsewhere; fabula resume has nothing to write in it")


PIPELINE = Pipeline(
    name=NAME,
    unit="chapter",
    run=_no_writing,
    version=VERSION,
    help="a manuscript imported with fabula import",
    takes="manuscript",
)
