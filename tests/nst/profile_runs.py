"""A 3,000-word story of a chapter-based pipeline under a profile, on a scripted model: the one way the
paper-profile tests start a run (``pipelines.start`` with the profile's settings, as the CLI does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent import pipelines
from agent.nst.config import DirectConfig
from agent.store import RunStore

PROMPT = {"prompt": "A keeper finds a bell in the harbour.", "prompt_id": None}


def written(run_dir: Path, name: str, cls: type, model: Any, profile: str = "paper", **over: Any) -> RunStore:
    """Run ``name`` in ``run_dir`` with ``cls``'s ``profile`` settings (``over`` on top); the plan cache sits
    beside the run (Direct plans nothing)."""
    cache = {} if cls is DirectConfig else {"plan_cache": str(run_dir.parent / "plans")}
    config = {**PROMPT, "words": 3000, **cache, **cls.profile_settings(profile), **over}
    llm = pipelines.LLMOptions(backend="scripted", model="scripted")
    return pipelines.start(run_dir, name, config, llm, model=model)
