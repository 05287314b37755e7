"""The backends a model can be opened on, by name: one registry for the built-ins, for those
registered from Python, and for those another package declares under the ``fabula.backends``
entry point group.

A plugin package declares ``NAME = "module:factory"`` in that group; ``factory(options, probe,
routing_key)`` opens its model (``options``: the resolved :class:`agent.llm.options.LLMOptions`).
Entry points are listed once, and a plugin is imported only when its name is asked for, so a
broken or slow plugin costs nothing to a command that does not use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cache
from importlib.metadata import EntryPoint
from typing import TYPE_CHECKING, Any, Literal

from agent.llm.types import LLMSetupError
from agent.plugins import group_entries, one_line, origin

if TYPE_CHECKING:
    from agent.llm.base import LLM

ENTRY_POINT_GROUP = "fabula.backends"
ProbeDepth = Literal["off", "light", "full"]
"""How much of a server to probe as it opens (``agent.llm.probe``): nothing, what it is, or also what it enforces."""
BackendFactory = Callable[[Any, ProbeDepth, "str | None"], "LLM"]
"""``factory(options, probe, routing_key)``: the model ``options`` (an ``LLMOptions``) asks for, opened."""

_REGISTERED: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    """Add (or replace) the backend ``name``: the built-ins, a test's scripted model and a plugin
    all come in here. A run stored with that backend name resumes on it."""
    _REGISTERED[name] = factory


def backend_factory(name: str) -> BackendFactory | None:
    """The factory of backend ``name`` (``None``: no such backend), importing its plugin the first time."""
    if name not in _REGISTERED and name in _plugins():
        register_backend(name, _load(_plugins()[name]))
    return _REGISTERED.get(name)


def is_backend(name: str) -> bool:
    """Whether ``name`` is a backend, registered or declared by a plugin (nothing is imported)."""
    return name in _REGISTERED or name in _plugins()


class BackendNames:
    """``--backend``'s choices: iterates over the registered backends (what ``--help`` lists) and
    also contains every plugin's, so naming a plugin's backend imports only that plugin."""

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(_REGISTERED))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and is_backend(name)

    def __len__(self) -> int:
        return len(_REGISTERED)


@cache
def _plugins() -> dict[str, EntryPoint]:
    """The installed packages' backends, by name (read from their metadata once per process)."""
    return {point.name: point for point in group_entries(ENTRY_POINT_GROUP)}


def _load(point: EntryPoint) -> BackendFactory:
    """A plugin's factory, or one line naming the plugin when it cannot be imported."""
    where = f"the backend {point.name!r} ({point.value}, from {origin(point)})"
    try:
        factory = point.load()
    except Exception as exc:  # a plugin's own failure, whatever it is: reported, never a traceback
        raise LLMSetupError(f"{where} cannot be loaded: {type(exc).__name__}: {one_line(exc)}") from None
    if not callable(factory):
        raise LLMSetupError(f"{where} is not a factory: {type(factory).__name__}")
    return factory
