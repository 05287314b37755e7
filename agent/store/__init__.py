"""The run store: one SQLite database per run directory (``RUN_DIR/run.db``).

Chapters and Magnet steps, the state after every unit, every LLM and tool call, and the
writer's BM25 chapter search; units are committed atomically and in order so that any run
can be resumed after a kill without losing or duplicating a committed unit.
"""

from agent.store.config import Change, config_changes, fingerprint
from agent.store.errors import (
    CommitError,
    NotARunError,
    RunBusyError,
    RunNotFoundError,
    SchemaTooNewError,
    StoreError,
    WrongPipelineError,
)
from agent.store.records import Chapter, Paragraph, RunInfo, ToolCall
from agent.store.runstore import RunStore
from agent.store.search import Hit

__all__ = [
    "Change",
    "Chapter",
    "CommitError",
    "Hit",
    "NotARunError",
    "Paragraph",
    "RunBusyError",
    "RunInfo",
    "RunNotFoundError",
    "RunStore",
    "SchemaTooNewError",
    "StoreError",
    "ToolCall",
    "WrongPipelineError",
    "config_changes",
    "fingerprint",
]
