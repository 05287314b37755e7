"""How to reach the model, resolved in one place: flags, then environment, then the default.

Every command that talks to a model (``write``, ``resume``, ``prompt``, the ``eval`` judges)
builds its :class:`LLMOptions` with :func:`resolve`, so ``FABULA_ENDPOINT`` means the same for
all of them; judges read their own variables (``FABULA_JUDGE_ENDPOINT``, ...). With no
endpoint anywhere the embedded default model is used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from agent.llm.base import LLM

Purpose = Literal["writer", "judge"]
ENV = {"writer": ("FABULA_ENDPOINT", "FABULA_MODEL", "FABULA_API_KEY"),
       "judge": ("FABULA_JUDGE_ENDPOINT", "FABULA_JUDGE_MODEL", "FABULA_JUDGE_API_KEY")}


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

    def transport(self) -> dict[str, Any]:
        """What a session records about how it reached the model (no credentials)."""
        return {"backend": self.backend, "endpoint": redact_url(self.endpoint), "model": self.model}

    def describe(self) -> str:
        """One line for the terminal: backend, endpoint (credentials removed) and model."""
        model = self.model or ("the embedded default" if self.backend == "embedded" else "the server's only model")
        where = f" at {redact_url(self.endpoint)}" if self.backend == "endpoint" and self.endpoint else ""
        return f"backend {self.backend}{where}, model {model}"

    def open(self, store: Any = None) -> LLM:
        """Open the model; with ``store``, every call is recorded in its ledger."""
        from agent.llm import open_llm

        key = routing_key(store) if store is not None and self.backend == "endpoint" else None
        llm = open_llm(self.backend, model=self.model, endpoint=self.endpoint,  # type: ignore[arg-type]
                       api_key=self.api_key, thinking=self.thinking or "off",  # type: ignore[arg-type]
                       routing_key=key)
        if store is not None:
            llm.recorders.append(store.recorder)
            probe = getattr(llm, "probe", None)  # the server's capabilities, recorded once per session
            if probe is not None:
                store.record_server_probe(probe.as_dict())
        return llm


def routing_key(store: Any) -> str:
    """A run's key for a router's sticky routing: the same for every session of the run (its
    folder and creation time), different for every run, revealing neither."""
    import hashlib

    seed = f"{store.run_dir.resolve()}|{store.info().created_at!r}"
    return "run-" + hashlib.sha256(seed.encode()).hexdigest()[:16]


def resolve(*, backend: str | None = None, endpoint: str | None = None, model: str | None = None,
            api_key: str | None = None, thinking: str | None = None, purpose: Purpose = "writer",
            environ: Mapping[str, str] | None = None) -> LLMOptions:
    """Flags first, then the environment of ``purpose``, then the default (embedded, no endpoint).

    A backend given explicitly keeps the endpoint from the environment (``--backend endpoint``
    with ``FABULA_ENDPOINT`` set), and ``--backend embedded`` ignores any endpoint.
    """
    env = os.environ if environ is None else environ
    env_endpoint, env_model, env_key = (env.get(name) or None for name in ENV[purpose])
    endpoint = endpoint or env_endpoint
    backend = backend or ("endpoint" if endpoint else "embedded")
    if backend == "embedded":
        return LLMOptions("embedded", model, thinking)
    return LLMOptions(backend, model or env_model, thinking, endpoint, api_key or env_key)


def redact_url(url: str | None) -> str | None:
    """A URL with user:password and query values shown as ``***`` (``agent.llm.http``'s rule)."""
    from agent.llm.http import redact_url as redact

    return None if url is None else redact(url)
