"""Where a batch put each story: its folder as the batch database records it."""

from __future__ import annotations

from pathlib import Path

from agent.batch import BatchStore


def story_dir(batch: Path, key: str) -> Path:
    """The run folder of story ``key`` of the batch in ``batch``."""
    with BatchStore.open(batch, readonly=True) as db:
        return db.run_path(db.story(key))
