"""The pipeline registry: how a stored run is started and resumed.

A pipeline registers a :class:`Pipeline` with a runner ``run(store, llm_options, config)``
that continues from ``store.next_unit()`` and commits each unit with
``store.commit_chapter``/``commit_step``, calling ``store.finish()`` after the last one.
Starting and resuming are then the same call; the store's in-order, once-only commits make
a resume after any kill safe.

The stored configuration (with the model settings under ``llm``) is fingerprinted. A
resume rebuilds the configuration as it would be now (the stored values, the pipeline's
current defaults and version, and what the user overrides) and refuses to continue if
anything differs, naming the keys, unless forced.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agent.store import Change, RunStore, StoreError, config_changes

if TYPE_CHECKING:
    from agent.llm import LLM


@dataclass(frozen=True)
class LLMOptions:
    """How to reach the model. ``backend``, ``model`` and ``thinking`` are part of the run's
    configuration; ``endpoint`` and ``api_key`` are transport only (a server may move)."""

    backend: str | None = None
    model: str | None = None
    thinking: str | None = None
    endpoint: str | None = field(default=None, compare=False)
    api_key: str | None = field(default=None, compare=False, repr=False)

    def fingerprinted(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "thinking": self.thinking or "off"}

    def open(self, store: RunStore | None = None) -> LLM:
        """Open the model; with ``store``, every call is recorded in its ledger."""
        from agent.llm import open_llm

        llm = open_llm(self.backend, model=self.model, endpoint=self.endpoint,  # type: ignore[arg-type]
                       api_key=self.api_key, thinking=self.thinking or "off")  # type: ignore[arg-type]
        if store is not None:
            llm.recorders.append(store.recorder)
            probe = getattr(llm, "probe", None)  # issue 15: the server's capabilities, once per session
            if probe is not None:
                store.record_server_probe(probe.as_dict())
        return llm


Runner = Callable[[RunStore, LLMOptions, dict[str, Any]], None]
Writer = Callable[["RunStore", "LLM", dict[str, Any]], None]


def writer_runner(write: Writer) -> Runner:
    """A runner from a writer: open the run's model (recording into its ledger), continue the
    story from the store's next unit, and close the model however the writer ends."""

    def run(store: RunStore, llm_options: LLMOptions, config: dict[str, Any]) -> None:
        with llm_options.open(store) as llm:
            write(store, llm, config)

    run.__doc__ = f"Runner for {getattr(write, '__qualname__', 'a writer')}."
    return run


@dataclass(frozen=True)
class Pipeline:
    """A registered pipeline: its name, what its unit is, and the runner."""

    name: str
    unit: Literal["chapter", "step"]
    run: Runner
    version: str = "1"
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def configure(self, config: Mapping[str, Any], llm: LLMOptions) -> dict[str, Any]:
        """The full configuration of a run: defaults, then ``config``, then version and model."""
        return {**self.defaults, **config, "pipeline_version": self.version, "llm": llm.fingerprinted()}


_REGISTRY: dict[str, Pipeline] = {}
BUILTIN: dict[str, str] = {
    "nst": "agent.nst.runner:PIPELINE",
    "rollsum": "agent.nst.rollsum:PIPELINE",
    "direct": "agent.nst.direct:PIPELINE",
    "magnet": "agent.magnet.runner:PIPELINE",
    "single": "agent.magnet.baseline:PIPELINE",
}
"""Pipelines shipped with fabula, as ``name -> "module:attribute"`` of a :class:`Pipeline`,
imported only when a run of that pipeline is started or resumed."""


class NoRunnerError(StoreError):
    """No runner is registered for the run's pipeline."""


class ConfigChangedError(StoreError):
    """The configuration differs from the stored one and the resume was not forced."""

    def __init__(self, changes: list[Change]) -> None:
        self.changes = changes
        listed = "; ".join(c.describe() for c in changes[:6]) + ("; ..." if len(changes) > 6 else "")
        super().__init__(f"the configuration changed since this run started ({listed}); pass --force to resume anyway")


def register(pipeline: Pipeline) -> Pipeline:
    _REGISTRY[pipeline.name] = pipeline
    return pipeline


def get(name: str) -> Pipeline:
    if name not in _REGISTRY and name in BUILTIN:
        module, _, attribute = BUILTIN[name].partition(":")
        register(getattr(importlib.import_module(module), attribute))
    if name not in _REGISTRY:
        raise NoRunnerError(f"no runner is registered for the {name} pipeline in this version of fabula")
    return _REGISTRY[name]


def start(run_dir: str | os.PathLike[str], name: str, config: Mapping[str, Any], llm: LLMOptions, *,
          target_units: int | None = None, initial_state: Any = None) -> RunStore:
    """Create a run of pipeline ``name`` in ``run_dir`` and run it; returns the (open) store."""
    pipeline = get(name)
    full = pipeline.configure(config, llm)
    store = RunStore.create(run_dir, pipeline=name, config=full, unit_kind=pipeline.unit, model=llm.model,
                            backend=llm.backend, target_units=target_units, initial_state=initial_state)
    try:
        with store.session("start"):
            pipeline.run(store, llm, full)
    except BaseException:
        store.close()
        raise
    return store


@dataclass(frozen=True)
class ResumePlan:
    """What a resume would do: the run's pipeline, the configuration, what changed."""

    pipeline: Pipeline
    config: dict[str, Any]
    llm: LLMOptions
    changes: list[Change]


def plan_resume(store: RunStore, *, overrides: Mapping[str, Any] | None = None,
                llm: LLMOptions | None = None) -> ResumePlan:
    """Rebuild the run's configuration as it would be now and list what changed.

    Unset model settings keep their stored values; ``overrides`` replace top-level config keys.
    """
    info = store.info()
    pipeline = get(info.pipeline)
    stored = dict(info.config)
    stored_llm = stored.get("llm") if isinstance(stored.get("llm"), dict) else {}
    given = llm or LLMOptions()
    effective_llm = LLMOptions(
        backend=given.backend or stored_llm.get("backend") or info.backend,
        model=given.model or stored_llm.get("model") or info.model,
        thinking=given.thinking or stored_llm.get("thinking") or "off",
        endpoint=given.endpoint,
        api_key=given.api_key,
    )
    base = {k: v for k, v in stored.items() if k not in ("pipeline_version", "llm")}
    current = pipeline.configure({**base, **(overrides or {})}, effective_llm)
    return ResumePlan(pipeline, current, effective_llm, config_changes(stored, current))


def resume(store: RunStore, *, overrides: Mapping[str, Any] | None = None, llm: LLMOptions | None = None,
           force: bool = False) -> ResumePlan:
    """Continue the run from its last committed unit (refused on a changed config unless ``force``)."""
    plan = plan_resume(store, overrides=overrides, llm=llm)
    if plan.changes and not force:
        raise ConfigChangedError(plan.changes)
    with store.session("resume", config=plan.config if plan.changes else None):
        plan.pipeline.run(store, plan.llm, plan.config)
    return plan
