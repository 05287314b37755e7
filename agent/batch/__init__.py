"""Many stories at once: a batch of ordinary runs, one folder each, plus a batch database.

The batch layer sits above the pipelines: it plans the stories (``stories``), keeps their
status and figures (``store``), writes them K at a time through the pipelines' own start and
resume (``runner``) and folds their progress into one picture (``tracker``).
``run_batch(folder, pipeline, prompts=..., words=..., llm=..., concurrency=K)`` is the Python
entry point; ``fabula batch`` is the command.
"""

from agent.batch.runner import BatchResult, create, run, run_batch
from agent.batch.store import DB_NAME, BatchStore, NotABatchError, StoryRow, is_batch
from agent.batch.stories import StorySpec, parse_ids, plan_stories
from agent.batch.tracker import Snapshot, Update

__all__ = [
    "DB_NAME",
    "BatchResult",
    "BatchStore",
    "NotABatchError",
    "Snapshot",
    "StoryRow",
    "StorySpec",
    "Update",
    "create",
    "is_batch",
    "parse_ids",
    "plan_stories",
    "run",
    "run_batch",
]
