"""The pipeline registry: how a stored run is started and resumed.

A pipeline registers a :class:`Pipeline`: its unit, its typed settings (``agent.settings``),
what it takes (a prompt or a story file), how its stored state is read and shown, its progress
vocabulary, and a runner ``run(ctx)`` that continues from ``ctx.store.next_unit()`` and commits each unit
with ``store.commit_chapter``/``commit_step``, calling ``store.finish()`` after the last one.
Starting and resuming are then the same call; the store's in-order, once-only commits make
a resume after any kill safe. The CLI, batch, the view and the store's readers ask the record
(:func:`get`, :func:`names`) instead of listing pipelines: adding one is its own package and one
line in :data:`BUILTIN`, or, from another installed package, an entry point in the group
:data:`PLUGIN_GROUP` (``name = "module:attribute"``), offered exactly like a built-in.

The stored configuration (the settings, validated, with the model settings under ``llm``) is
fingerprinted. A resume rebuilds the configuration as it would be now (the stored values, the
pipeline's current defaults and version, and what the user overrides, validated the same
way) and refuses to continue if anything differs, naming the keys, unless forced.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agent.llm.options import LLMOptions, ModelFlags, StoredModel
from agent.llm.options import resolve as resolve_model
from agent.plugins import forget_warnings, group_entries, one_line, origin, warn_once
from agent.run_context import EventSink, RunContext
from agent.settings import Settings, WordRange, WritingControls
from agent.store import Change, RunInfo, RunStore, StoreError, config_changes
from agent.store.snapshots import ChapterSnapshot, Record, RunTarget, StepState

if TYPE_CHECKING:
    from agent.llm import LLM

Runner = Callable[[RunContext[Any]], None]


class StoryConfigReader(Protocol):
    """Reads a story definition file into a run's configuration entries; ``pages``, ``words`` or
    ``page_words`` (the command line's) override the story's length."""

    def __call__(
        self, path: Path, *, pages: float | None = None, words: int | None = None, page_words: int | None = None
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Rederived:
    """What re-deriving the state of an edited unit did: ``ok`` when the stored state now follows
    from the edited text (or the pipeline keeps none derived from it); ``what``: one line for the writer."""

    unit: int
    ok: bool
    what: str
    calls: int = 0


Rederiver = Callable[[RunContext[Any], int], Rederived]
InputKind = Literal["prompt", "story", "manuscript"]
"""What a pipeline writes from: a prompt (and ``--words``), or a story definition file; or, for a
run kind of :data:`KINDS`, what its runs are made from (a manuscript file: ``fabula import``)."""


@dataclass(frozen=True)
class Flag:
    """An option of ``fabula write NAME`` that sets one setting: a value (``kind`` int, float,
    ...) or, with ``kind`` None, a switch that sets ``value``."""

    option: str
    setting: str
    help: str
    kind: Callable[[str], Any] | None = None
    value: Any = False
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.option.lstrip("-").replace("-", "_")

    def add_to(self, parser: Any) -> None:
        """Add the option to an argparse parser (or group)."""
        if self.kind is None:
            parser.add_argument(self.option, action="store_true", help=self.help)
        else:
            parser.add_argument(
                self.option, type=self.kind, help=self.help, **({"metavar": self.metavar} if self.metavar else {})
            )

    def read(self, args: Any) -> Any:
        """The setting's value from parsed arguments (None: the option was not given)."""
        given = getattr(args, self.dest, None)
        if self.kind is None:
            return self.value if given else None
        return given


@dataclass(frozen=True)
class Pipeline:
    """A registered pipeline: its name, what its unit is, its settings and the runner, and how
    the rest of fabula speaks of it (what it takes, its options, how its state is read and
    shown, the words its progress uses)."""

    name: str
    unit: Literal["chapter", "step"]
    run: Runner
    version: str = "1"
    settings: type[WritingControls] | None = None
    """The typed configuration; None only for test pipelines that take a plain dict."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """Defaults of a plain-dict pipeline; a typed one's come from its settings."""
    rederive: Rederiver | None = None
    """Re-derives the state stored with a committed unit from its (edited) text, within a run
    context whose ledger attributes the calls to that unit; None: the pipeline's states are not
    derived from its text by a model call (see :func:`rederive`)."""
    takes: InputKind = "prompt"
    """A prompt (``fabula write NAME --prompt ... --words N``, batch ``--prompts``) or a story
    definition file (``fabula write NAME STORY.toml``, batch ``--stories``)."""
    help: str = ""
    """One line for ``fabula write --help``."""
    description: str = ""
    """``fabula write NAME --help``'s description (default: ``help`` and a full stop)."""
    planned: bool = False
    """An outline is stored before the first unit (``--plan-only``, ``--plan-cache``, ``fabula outline``)."""
    flags: tuple[Flag, ...] = ()
    """The pipeline's own options of ``fabula write NAME``."""
    flag_group: str | None = None
    """A heading for them in the help (None: listed with the others)."""
    state: type[Record] | None = None
    """The reader of the state stored with each unit (default: by unit, ChapterSnapshot or StepState)."""
    story_config: StoryConfigReader | None = None
    """A story pipeline: the configuration entries of a story file (``words`` overriding its length)."""
    graph: Callable[[RunStore, int | None], str] | None = None
    """An SVG of the stored state at a unit (None: the state has no graph to show)."""
    history: Callable[[RunStore], list[str]] | None = None
    """The lines of ``fabula show --history`` (None: the pipeline keeps no commit history)."""
    progress: Mapping[str, str] = field(default_factory=dict)
    """What a model call of each of its roles is doing, as a writer would say it."""
    tools: tuple[str, ...] = ()
    """The tools its writer calls in a loop, as the ledger names them (``fabula repro``'s Table 8
    counts them per chapter); empty for a pipeline that writes without tools."""
    words: WordRange | None = None
    """The range of ``--words`` that ``fabula write`` and ``fabula batch`` accept (None: the
    story file sets the length and checks it)."""
    drafts: bool = False
    """``--drafts N`` writes several drafts of each chapter's prose and keeps the best."""
    seeded: bool = False
    """A story bible (``--bible``) seeds the narrative state it starts from, not only its prompts."""
    model_roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """The roles that may each have a model of their own (``--role-model ROLE=MODEL``), each with the
    ledger roles of its calls; a role not given one, and any call of another role, asks the run's model."""
    reconciles: Callable[[RunInfo], bool] | None = None
    """Whether ``fabula reconcile`` brings a run of it up to date after a hand edit (re-derives its
    state and judges the later chapters); None: never, a fork goes on from the edit instead."""

    def __post_init__(self) -> None:
        if self.settings is not None and not self.defaults:
            object.__setattr__(self, "defaults", self.settings.defaults())
        if not self.description and self.help:
            object.__setattr__(self, "description", self.help + ".")
        if self.state is None:
            object.__setattr__(self, "state", ChapterSnapshot if self.unit == "chapter" else StepState)

    def check_words(self, words: int) -> int:
        """``--words`` checked against the pipeline's range, once, where the command line is read."""
        return self.words.check_flag(words) if self.words is not None else words

    @staticmethod
    def target(config: Mapping[str, Any]) -> RunTarget:
        """What a run was asked to write, from its stored configuration."""
        return RunTarget.of(dict(config))

    def typed(self, config: Mapping[str, Any]) -> Any:
        """The run's configuration as the runner reads it (validated), from a stored dict."""
        if self.settings is None:
            return dict(config)
        return self.settings.parse(config, owner=self.name)

    def settle(self, config: Mapping[str, Any] | Settings) -> Any:
        """The run's typed settings: defaults, then ``config``, validated once (already typed: as it is)."""
        if isinstance(config, Settings):
            return config
        base = {k: v for k, v in config.items() if k not in ("pipeline_version", "llm")}
        return self.typed({**self.defaults, **base})

    def stored_config(self, settings: Any, llm: LLMOptions) -> dict[str, Any]:
        """What a run stores of its settings: every value, then the pipeline's version and the model."""
        stored = settings.stored() if isinstance(settings, Settings) else settings
        return {**stored, "pipeline_version": self.version, "llm": llm.fingerprinted()}

    def configure(self, config: Mapping[str, Any] | Settings, llm: LLMOptions) -> dict[str, Any]:
        """The full stored configuration: defaults, then ``config`` (validated), then version and model."""
        return self.stored_config(self.settle(config), llm)


_REGISTRY: dict[str, Pipeline] = {}
BUILTIN: dict[str, str] = {
    "nst": "agent.nst.runner:PIPELINE",
    "rollsum": "agent.nst.baselines.rollsum:PIPELINE",
    "direct": "agent.nst.baselines.direct:PIPELINE",
    "magnet": "agent.magnet.runner:PIPELINE",
    "single": "agent.magnet.baseline:PIPELINE",
}
"""Pipelines shipped with fabula, as ``name -> "module:attribute"`` of a :class:`Pipeline`,
imported only when a run of that pipeline is started or resumed."""
KINDS: dict[str, str] = {
    "imported": "agent.manuscript.kind:PIPELINE",
}
"""Run kinds fabula reads, shows, searches and exports but does not write with a model (a book
made by ``fabula import``): described by a :class:`Pipeline` like the others, never offered by
``fabula write`` or ``fabula batch`` (:func:`names` lists :data:`BUILTIN` and plugins only)."""
PLUGIN_GROUP = "fabula.pipelines"
"""The entry-point group through which another installed package adds a pipeline: ``name =
"module:attribute"`` of a :class:`Pipeline` called ``name``. Read once, when the pipelines are
first listed or a name outside :data:`BUILTIN` and :data:`KINDS` is asked for; a plugin never
replaces fabula's own."""
_PLUGINS: dict[str, EntryPoint] | None = None
_BROKEN: dict[str, PluginError] = {}


class NoRunnerError(StoreError):
    """No runner is registered for the run's pipeline."""


class PluginError(NoRunnerError):
    """A plugin's pipeline did not load; the message is one line naming the plugin and its entry point."""


class ConfigChangedError(StoreError):
    """The configuration differs from the stored one and the resume was not forced."""

    def __init__(self, changes: list[Change]) -> None:
        self.changes = changes
        listed = "; ".join(c.describe() for c in changes[:6]) + ("; ..." if len(changes) > 6 else "")
        super().__init__(f"the configuration changed since this run started ({listed}); pass --force to resume anyway")


def register(pipeline: Pipeline) -> Pipeline:
    _REGISTRY[pipeline.name] = pipeline
    return pipeline


def names(takes: InputKind | None = None) -> tuple[str, ...]:
    """The pipelines fabula offers (``fabula write``, ``batch --pipeline``): :data:`BUILTIN`'s in its
    order, then the plugins that load (:func:`plugins`) by name; those that take ``takes`` if given.
    A pipeline registered from Python (a test's) runs and resumes (:func:`get`) but is not offered."""
    offered = (*BUILTIN, *(name for name in plugins() if _loads(name)))
    return tuple(name for name in offered if takes is None or get(name).takes == takes)


def plugins() -> dict[str, EntryPoint]:
    """The pipelines other installed packages add (:data:`PLUGIN_GROUP`), by name, read once per
    process (:func:`rescan` reads them again). Why once: every command's parser lists them."""
    global _PLUGINS
    if _PLUGINS is None:
        _PLUGINS = _scan()
    return _PLUGINS


def rescan() -> None:
    """Forget the plugins read so far and the pipelines loaded from them, so that the next lookup
    reads the entry points again: for a test that installs one, or a process that outlives an install."""
    global _PLUGINS
    for name in _PLUGINS or ():
        _REGISTRY.pop(name, None)
    _PLUGINS = None
    _BROKEN.clear()
    forget_warnings()


def _scan() -> dict[str, EntryPoint]:
    """The group's entry points by name, in a stable order; one whose name is taken (by fabula's own
    or by an earlier plugin) is left out with a warning. Why: a plugin adds, it never replaces."""
    found: dict[str, EntryPoint] = {}
    for entry in group_entries(PLUGIN_GROUP):
        taken = _taken(entry.name, found)
        if taken is None:
            found[entry.name] = entry
        else:
            warn_once(f"the {_described(entry)} is ignored: {taken}")
    return found


def _taken(name: str, found: Mapping[str, EntryPoint]) -> str | None:
    """Why a plugin may not have ``name`` (None: it may)."""
    if name in BUILTIN or name in KINDS:
        return f"{name} is one of fabula's own pipelines"
    if name in found:
        return f"{name} is already given by {origin(found[name])}"
    return None


def _described(entry: EntryPoint) -> str:
    """A plugin as a one-line message names it: its pipeline, its entry point and its package."""
    return (
        f"pipeline plugin {entry.name} (entry point {entry.name} = {entry.value} in {PLUGIN_GROUP}, "
        f"from {origin(entry)})"
    )


def _loads(name: str) -> bool:
    """Whether plugin ``name`` loads; one that does not is warned of and left out. Why: a broken
    plugin must not stop fabula's own pipelines (its runs still say why: :func:`get` raises)."""
    try:
        get(name)
    except PluginError as exc:
        warn_once(str(exc))
        return False
    return True


def after_edit(store: RunStore, unit: int, run: str | None = None) -> str:
    """The one command that goes on after a hand edit of ``unit``: ``fabula reconcile`` where the
    run's pipeline can bring it up to date (:attr:`Pipeline.reconciles`), else a fork from the edit.
    ``run``: the run as the writer named it (default: its full path)."""
    info, run = store.info(), run or str(store.run_dir)
    described = known(info.pipeline)
    if described is not None and described.reconciles is not None and described.reconciles(info):
        return f"fabula reconcile {run}"
    return f"fabula fork {run} --at {unit} --out NEW"


def known(name: str) -> Pipeline | None:
    """The pipeline called ``name``, or None when this version of fabula has none by that name."""
    try:
        return get(name)
    except NoRunnerError:
        return None


def spoken(items: tuple[str, ...] | list[str], last: str = "and") -> str:
    """``a, b and c``: names in a sentence."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {last} {items[-1]}"


def get(name: str) -> Pipeline:
    """The pipeline called ``name``, loaded on first use from its entry: fabula's own (:data:`BUILTIN`,
    :data:`KINDS`) first, then a plugin's. :class:`PluginError` for a plugin that does not load,
    :class:`NoRunnerError` for a name nothing gives."""
    if name not in _REGISTRY:
        entry = _entry(name)
        if entry is not None:
            register(entry.load() if entry.group != PLUGIN_GROUP else _plugin_pipeline(entry))
    if name not in _REGISTRY:
        raise NoRunnerError(f"no runner is registered for the {name} pipeline in this version of fabula")
    return _REGISTRY[name]


def _entry(name: str) -> EntryPoint | None:
    """Where pipeline ``name`` is loaded from: a built-in's ``module:attribute`` as an entry point of
    its own group (``fabula``), else the plugin's entry point; None: nothing gives that name.
    Why one type: a built-in and a plugin are loaded the same way."""
    where = BUILTIN.get(name) or KINDS.get(name)
    return EntryPoint(name, where, "fabula") if where is not None else plugins().get(name)


def _plugin_pipeline(entry: EntryPoint) -> Pipeline:
    """The plugin's :class:`Pipeline`, or :class:`PluginError` (one line, remembered: the import is
    tried once) when its module fails to import or the entry point yields something else."""
    if entry.name not in _BROKEN:
        try:
            loaded = entry.load()
        except Exception as exc:
            problem: str | None = f"failed to load: {type(exc).__name__}: {one_line(exc)}"
        else:
            problem = _misfit(entry.name, loaded)
        if problem is None:
            return loaded
        _BROKEN[entry.name] = PluginError(f"the {_described(entry)} {problem}")
    raise _BROKEN[entry.name]


def _misfit(name: str, loaded: Any) -> str | None:
    """Why what an entry point yields is not a pipeline fabula can offer as ``name`` (None: it is)."""
    if not isinstance(loaded, Pipeline):
        what = f"the class {loaded.__name__}" if isinstance(loaded, type) else f"a {type(loaded).__name__}"
        return f"yields {what}, not an agent.pipelines.Pipeline"
    if loaded.name != name:
        return f"yields the pipeline {loaded.name}, not {name}"
    if loaded.takes not in ("prompt", "story"):
        return f"takes {loaded.takes}; a pipeline fabula writes with takes a prompt or a story"
    if loaded.settings is None or not issubclass(loaded.settings, WritingControls):
        return "has no settings derived from agent.settings.WritingControls (fabula write reads its profiles there)"
    if loaded.takes == "story" and loaded.story_config is None:
        return "takes a story but has no story_config to read a story file with"
    return None


def _run(
    pipeline: Pipeline,
    store: RunStore,
    settings: Any,
    llm: LLMOptions,
    events: EventSink | None,
    model: LLM | None = None,
    plan_only: bool = False,
) -> None:
    """Run ``pipeline`` on ``store`` with its typed ``settings`` (parsed once by the caller)."""
    if model is not None:
        llm.attach_run(model, store)
    with RunContext(store, settings, llm=model, open_llm=llm.open, events=events, plan_only=plan_only) as ctx:
        pipeline.run(ctx)


def start(
    run_dir: str | os.PathLike[str],
    name: str,
    config: Mapping[str, Any] | Settings,
    llm: LLMOptions,
    *,
    target_units: int | None = None,
    initial_state: Any = None,
    events: EventSink | None = None,
    model: LLM | None = None,
    notes: Mapping[str, Any] | None = None,
    plan_only: bool = False,
) -> RunStore:
    """Create a run of pipeline ``name`` in ``run_dir`` and run it; returns the (open) store.

    The configuration is validated before the run directory is created, so bad settings leave
    nothing behind. ``model``: an open model to use (and leave open) instead of opening one from
    ``llm``, for a caller that runs several stories one after another on one loaded model (or
    that opened the run's one client before creating it). ``notes``: plan entries stored with
    the run before it starts (how the CLI chose the profile, say). ``plan_only``: a planned
    pipeline stores its outline and stops (resumable; not a setting)."""
    pipeline = get(name)
    settings = pipeline.settle(config)  # validated once, and handed to the runner typed
    full = pipeline.stored_config(settings, llm)
    store = RunStore.create(
        run_dir,
        pipeline=name,
        config=full,
        unit_kind=pipeline.unit,
        model=llm.model,
        backend=llm.backend,
        target_units=target_units,
        initial_state=initial_state,
    )
    try:
        for key, value in (notes or {}).items():
            store.plans.put(key, value)
        with store.sessions.hold("start", transport=llm.transport()):
            # a pipeline without a settings type reads its stored dict whole (version and model included)
            typed = settings if isinstance(settings, Settings) else pipeline.typed(full)
            _run(pipeline, store, typed, llm, events, model, plan_only)
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


def stored_model(store: RunStore) -> StoredModel:
    """What a run recorded about its model: the configuration's ``llm`` and the transport of its
    latest session (the server it was written on, without credentials)."""
    info = store.info()
    llm = info.config.get("llm") if isinstance(info.config.get("llm"), dict) else {}
    described = known(info.pipeline)
    return StoredModel.from_record(
        llm,
        store.sessions.last_transport(),
        backend=info.backend,
        model=info.model,
        model_roles=described.model_roles if described is not None else None,
    )


def plan_resume(
    store: RunStore, *, overrides: Mapping[str, Any] | None = None, llm: LLMOptions | None = None
) -> ResumePlan:
    """Rebuild the run's configuration as it would be now and list what changed.

    ``llm``: what the caller chose (the CLI's resolved choice, or a few fields from Python);
    unset fields come from the run's record (``agent.llm.options.resolve``, the one merge), so
    a resume continues on the server the run was written on. ``overrides`` replace top-level
    config keys and are validated like a new run's settings (an invalid value is refused
    before anything is stored; a stored value that is invalid can be replaced this way)."""
    info = store.info()
    pipeline = get(info.pipeline)
    stored = dict(info.config)
    effective_llm = resolve_model(ModelFlags.of(llm) if llm is not None else None, stored=stored_model(store))
    if llm is not None and llm.origin:  # a choice resolved by the caller keeps saying where it came from
        effective_llm = replace(effective_llm, origin={**effective_llm.origin, **llm.origin})
    base = {k: v for k, v in stored.items() if k not in ("pipeline_version", "llm")}
    current = pipeline.configure({**base, **(overrides or {})}, effective_llm)
    return ResumePlan(pipeline, current, effective_llm, config_changes(stored, current))


def resume(
    store: RunStore,
    *,
    overrides: Mapping[str, Any] | None = None,
    llm: LLMOptions | None = None,
    force: bool = False,
    events: EventSink | None = None,
    model: LLM | None = None,
) -> ResumePlan:
    """Continue the run from its last committed unit (refused on a changed config unless ``force``);
    ``model`` as for :func:`start`."""
    plan = plan_resume(store, overrides=overrides, llm=llm)
    if plan.changes and not force:
        raise ConfigChangedError(plan.changes)
    with store.sessions.hold("resume", config=plan.config if plan.changes else None, transport=plan.llm.transport()):
        _run(plan.pipeline, store, plan.pipeline.typed(plan.config), plan.llm, events, model)
    return plan


def rederive(
    store: RunStore,
    unit: int,
    *,
    llm: LLMOptions | None = None,
    events: EventSink | None = None,
    model: LLM | None = None,
) -> Rederived:
    """Re-derive the state stored with committed ``unit`` from its current text (after ``fabula
    edit``), with the run's stored configuration and model (``llm`` overrides the transport).

    Held like a resume (one writer at a time; a ``rederive`` session in the ledger) but it leaves
    the run's status as it was: it advances nothing. A failed model call is the pipeline's to
    report (``ok`` False); the edit stays committed and the run resumable either way."""
    info = store.info()
    pipeline = get(info.pipeline)
    if pipeline.rederive is None:
        return Rederived(unit, True, f"a {info.pipeline} run keeps no state derived from its text by the model")
    with on_unit(store, unit, "rederive", llm=llm, events=events, model=model) as ctx:
        return pipeline.rederive(ctx, unit)


@contextmanager
def on_unit(
    store: RunStore,
    unit: int,
    kind: str,
    *,
    llm: LLMOptions | None = None,
    events: EventSink | None = None,
    model: LLM | None = None,
) -> Iterator[RunContext[Any]]:
    """A run context for work on committed ``unit`` (a re-derivation, a revision): the run's
    configuration as the unit was written, its model (``llm`` overrides the transport), a ``kind``
    session that holds the run and leaves its status as it found it, calls attributed to ``unit``."""
    info = store.info()
    pipeline = get(info.pipeline)
    plan = plan_resume(store, llm=llm)
    config = pipeline.typed(info.config)  # as the unit was written, not as a resume would be
    with store.sessions.hold(kind, transport=plan.llm.transport(), keep_status=True):
        if model is not None:
            plan.llm.attach_run(model, store)
        with RunContext(store, config, llm=model, open_llm=plan.llm.open, events=events) as ctx, ctx.unit(unit):
            yield ctx


__all__ = [
    "BUILTIN",
    "KINDS",
    "PLUGIN_GROUP",
    "ConfigChangedError",
    "Flag",
    "InputKind",
    "LLMOptions",
    "NoRunnerError",
    "Pipeline",
    "PluginError",
    "Rederived",
    "Rederiver",
    "ResumePlan",
    "Runner",
    "get",
    "known",
    "names",
    "on_unit",
    "plan_resume",
    "plugins",
    "rederive",
    "register",
    "rescan",
    "resume",
    "spoken",
    "start",
    "stored_model",
]
