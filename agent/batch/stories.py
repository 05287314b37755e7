"""Which stories a batch writes: prompts picked from a prompt set, or Magnet story definitions.

Every story's full configuration is built and validated here, before anything is created, so
a bad id, file or setting is one line and leaves nothing behind. Each story is a
:class:`StorySpec`: a key (the prompt's id or the definition's file name), the folder its run
goes into, and the configuration its run starts with.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent import pipelines
from agent.errors import InputError
from agent.llm.options import LLMOptions


@dataclass(frozen=True)
class StorySpec:
    """One story of a batch: ``key`` (unique), ``run_dir`` (a folder name inside the batch), ``config``."""

    key: str
    run_dir: str
    config: dict[str, Any]


def parse_ids(spec: str) -> list[tuple[str, str | None]]:
    """``"1-20,35"`` as ``[("1", "20"), ("35", None)]``: inclusive numeric ranges and single ids."""
    parts = [p.strip() for p in spec.split(",")]
    if not spec.strip() or any(not p for p in parts):
        raise InputError(f"--ids: empty id in {spec!r}; use e.g. 1-20,35")
    out: list[tuple[str, str | None]] = []
    for part in parts:
        match = re.fullmatch(r"(\d+)\s*-\s*(\d+)", part)
        if match:
            low, high = match.groups()
            if int(low) > int(high):
                raise InputError(f"--ids: range {part} runs backwards")
            out.append((low, high))
        elif "-" in part or any(c.isspace() for c in part):
            raise InputError(f"--ids: {part!r} is neither an id nor a range LOW-HIGH")
        else:
            out.append((part, None))
    return out


def _read_prompt_set(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """``(id, prompt)`` of every line of a JSONL prompt set, in file order (``agent.prompt_set``)."""
    from agent.prompt_set import read_prompt_set

    return read_prompt_set(path)


def select_prompts(path: str | os.PathLike[str], ids: str | None) -> list[tuple[str, str]]:
    """The prompts of the set that ``ids`` picks (all without it), in file order."""
    items = _read_prompt_set(path)
    if ids is None:
        return items
    wanted = parse_ids(ids)
    picked: set[str] = set()
    for low, high in wanted:
        if high is None:
            if low not in {key for key, _ in items}:
                raise InputError(f"no prompt with id {low} in {path}")
            picked.add(low)
            continue
        hits = {key for key, _ in items if key.isdigit() and int(low) <= int(key) <= int(high)}
        if not hits:
            raise InputError(f"no prompt with an id in {low}-{high} in {path}")
        picked |= hits
    return [(key, prompt) for key, prompt in items if key in picked]


FOLDER_WORDS = 8
"""How many of a prompt's first words name its story's folder (``3-a-lighthouse-keeper-finds-a-bell``)."""


def prompt_folder(key: str, prompt: str) -> str:
    """A story's folder name: its prompt id, then the prompt's first words (lower case, letters and
    digits of any script), so a batch's folders say which story each is; the id keeps them unique
    and in the set's order. A batch made before keeps its folders: each story's is in batch.db."""
    words = re.findall(r"\w+", prompt.lower())[:FOLDER_WORDS]
    return "-".join([key, *words])[:60].strip(".-_")


def _folder_name(key: str, taken: set[str]) -> str:
    base = re.sub(r"[^\w.-]+", "-", key).strip(".-")[:60] or "story"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def plan_stories(
    pipeline: str,
    *,
    prompts: str | os.PathLike[str] | None = None,
    ids: str | None = None,
    stories: str | os.PathLike[str] | None = None,
    words: int | None = None,
    settings: Mapping[str, Any] | None = None,
    profile: str = "default",
) -> list[StorySpec]:
    """Every story of a new batch with its validated configuration.

    ``prompts`` (a JSONL set, ``ids`` picking some) feeds the pipelines that take a prompt;
    ``stories`` (a folder of story definitions) feeds those that take a story file. ``words`` is each story's
    target (for Magnet it overrides the definition's length); ``settings`` are ``--set`` values,
    applied to every story after the ``profile``."""
    if pipeline not in pipelines.names():
        raise InputError(f"unknown pipeline {pipeline!r}; use one of {', '.join(pipelines.names())}")
    registered = pipelines.get(pipeline)
    for key in ("words", "prompt", "prompt_id", "story"):
        if key in (settings or {}):
            raise InputError(
                f"--set {key} is not a batch setting: each story's "
                f"{'length comes from --words' if key == 'words' else 'text comes from its source'}"
            )
    shared: dict[str, Any] = {}
    if registered.settings is not None:
        shared.update(registered.settings.profile_settings(profile))
    shared.update(settings or {})
    if registered.takes == "prompt":
        if prompts is None or stories is not None:
            raise InputError(f"a {pipeline} batch takes its stories from --prompts FILE.jsonl (not --stories)")
        if words is None:
            raise InputError(f"a {pipeline} batch needs --words N")
        specs = _prompt_specs(select_prompts(prompts, ids), words, shared)
    else:
        if stories is None or prompts is not None:
            raise InputError(
                f"a {pipeline} batch takes its stories from --stories DIR of TOML definitions (not --prompts)"
            )
        if ids is not None:
            raise InputError("--ids only goes with --prompts")
        specs = _definition_specs(registered, Path(stories), words, shared)
    for spec in specs:  # every setting of every story checked before anything is created
        registered.configure(spec.config, LLMOptions())
    return specs


def _prompt_specs(items: Sequence[tuple[str, str]], words: int, shared: Mapping[str, Any]) -> list[StorySpec]:
    taken: set[str] = set()
    return [
        StorySpec(
            key,
            _folder_name(prompt_folder(key, prompt), taken),
            {**shared, "prompt": prompt, "prompt_id": key, "words": words},
        )
        for key, prompt in items
    ]


def _definition_specs(
    pipeline: pipelines.Pipeline, folder: Path, words: int | None, shared: Mapping[str, Any]
) -> list[StorySpec]:
    assert pipeline.story_config is not None, f"{pipeline.name} takes a story file but cannot read one"
    if not folder.is_dir():
        raise InputError(f"--stories {folder}: not a folder of story definitions")
    files = sorted(folder.glob("*.toml"))
    if not files:
        raise InputError(f"--stories {folder}: no .toml story definitions in it")
    taken: set[str] = set()
    specs = []
    for path in files:
        specs.append(
            StorySpec(path.stem, _folder_name(path.stem, taken), {**shared, **pipeline.story_config(path, words=words)})
        )
    return specs


def target_words(config: Mapping[str, Any]) -> int:
    """A story's target length from its configuration (either family of pipelines)."""
    return pipelines.Pipeline.target(config).words or 0
