"""The plan cache: one frozen plan per (model, prompt, target length, planner version).

Every chapter-based method reads the same cached plan, so NstAgent, its ablations and
RollSum are compared on an identical outline. Each entry carries the SHA-256 digest of its
plan; an entry whose digest does not match (edited, truncated) is ignored and replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from agent.nst.config import PLANNER_VERSION
from agent.store.config import canonical_json, fingerprint
from agent.weights.home import fabula_home


def default_dir() -> Path:
    return fabula_home() / "plans"


def prompt_key(prompt: str, prompt_id: str | None) -> str:
    """The prompt's part of the key: its id in a prompt set, else a hash of its text."""
    if prompt_id is not None:
        return f"id:{prompt_id}:{hashlib.sha256(prompt.encode('utf-8')).hexdigest()[:16]}"
    return "sha256:" + hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def cache_key(model: str | None, prompt: str, prompt_id: str | None, words: int) -> dict[str, Any]:
    return {
        "model": model or "default",
        "prompt": prompt_key(prompt, prompt_id),
        "words": int(words),
        "planner_version": PLANNER_VERSION,
    }


def plan_digest(plan: dict[str, Any]) -> str:
    return fingerprint(plan)


class PlanCache:
    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory else default_dir()

    def path(self, key: dict[str, Any]) -> Path:
        return self.directory / f"{fingerprint(key)[:32]}.json"

    def get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        """The cached plan, or ``None`` if absent, foreign or failing its digest."""
        path = self.path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("plan"), dict):
            return None
        if entry.get("digest") != plan_digest(entry["plan"]):
            return None
        return entry["plan"]

    def put(self, key: dict[str, Any], plan: dict[str, Any]) -> str:
        """Store ``plan`` atomically (write then rename); returns its digest."""
        digest = plan_digest(plan)
        self.directory.mkdir(parents=True, exist_ok=True)
        text = canonical_json({"key": key, "plan": plan, "digest": digest})
        fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, self.path(key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return digest
