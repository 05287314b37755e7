"""The one check a run that speaks the native tool protocol makes before its first tool turn.

A server answers a native tool request only when it was started for it (vLLM's
``--enable-auto-tool-choice --tool-call-parser``, llama-server's ``--jinja``), and nothing it lists
says so: without this check such a run would fail at its first chapter turn, after the plan was paid for.
"""

from __future__ import annotations

from agent.llm.base import LLM
from agent.llm.role_router import RoleRouter


def require_native_tools(llm: LLM, *, role: str | None = None) -> None:
    """Raise :class:`~agent.llm.types.LLMSetupError` (one line, naming the fix) when the model that
    answers ``role`` cannot take native tools. A backend that can tell has ``require_native_tools()``
    (a server: :meth:`agent.llm.endpoint.EndpointLLM.require_native_tools`, one probe request, asked once);
    any other backend is taken at its word (an in-process engine renders the tools itself)."""
    model = llm.model_for(role) if isinstance(llm, RoleRouter) else llm
    check = getattr(model, "require_native_tools", None)
    if callable(check):
        check()
