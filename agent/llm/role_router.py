"""One model per role: a run whose roles have models of their own (Magnet's character agents,
critic, narrator and goal generator, each on its own model in the paper) talks to a
:class:`RoleRouter`, which sends each request to the model of the role it is asked for
(``Request.role``, the ledger's role) and every other request to the run's model.

The router is what :meth:`agent.llm.options.LLMOptions.open` returns when roles are chosen, so a
pipeline asks it exactly as it asks one model. Each model records its own calls (its backend, the
model its server says it ran), into the same recorders: the run's ledger sees one call per request
with the model that answered it. The run's context budget, token counter and probe are the run's
model's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent.llm.base import LLM, Recorder, Request
from agent.llm.constraints import OutputType
from agent.llm.context import TokenCounter
from agent.llm.sampling import Sampling
from agent.llm.types import Completion, LLMError, Message, RawReply, ToolSpec


class RoleRouter(LLM):
    """The run's model (``default``) and, by ledger role, the models of the roles that have their own."""

    def __init__(self, default: LLM, by_role: Mapping[str, LLM]) -> None:
        self.default = default
        self.by_role = dict(by_role)
        super().__init__(default.model, thinking=default.thinking)
        self.backend = default.backend
        shared: list[Recorder] = default.recorders
        for llm in self._models():
            shared.extend(r for r in llm.recorders if r not in shared)
            llm.recorders = shared  # one list: a recorder added to the router hears every model
        self.recorders = shared

    def _models(self) -> list[LLM]:
        """Every model the router holds, each once, the run's first."""
        unique: list[LLM] = [self.default]
        for llm in self.by_role.values():
            if all(llm is not seen for seen in unique):
                unique.append(llm)
        return unique

    def model_for(self, role: str | None) -> LLM:
        """The model that answers a request of ``role``."""
        return self.by_role.get(role or "", self.default)

    @property
    def sampling_policy(self) -> Callable[[str | None], Sampling] | None:
        return getattr(self, "_policy", None)

    @sampling_policy.setter
    def sampling_policy(self, policy: Callable[[str | None], Sampling] | None) -> None:
        self._policy = policy
        for llm in self._models():
            llm.sampling_policy = policy

    def generate(
        self,
        messages: Sequence[Message],
        output_type: OutputType = None,
        *,
        temperature: float,
        max_tokens: int,
        min_tokens: int | None = None,
        stop: list[str] | None = None,
        seed: int | None = None,
        role: str | None = None,
        sampling: Sampling | None = None,
        tools: list[ToolSpec] | None = None,
        ask_again_if_looped: bool = True,
    ) -> Completion:
        return self.model_for(role).generate(
            messages,
            output_type,
            temperature=temperature,
            max_tokens=max_tokens,
            min_tokens=min_tokens,
            stop=stop,
            seed=seed,
            role=role,
            sampling=sampling,
            tools=tools,
            ask_again_if_looped=ask_again_if_looped,
        )

    def generate_many(
        self, requests: Sequence[Request], *, return_exceptions: bool = False
    ) -> list[Completion | LLMError]:
        """Each model runs its own requests (concurrently where it can); results keep ``requests``' order."""
        groups: dict[int, list[int]] = {}
        models: dict[int, LLM] = {}
        for i, request in enumerate(requests):
            llm = self.model_for(request.role)
            groups.setdefault(id(llm), []).append(i)
            models[id(llm)] = llm
        results: list[Completion | LLMError | None] = [None] * len(requests)
        for key, indices in groups.items():
            answers = models[key].generate_many([requests[i] for i in indices], return_exceptions=True)
            for i, answer in zip(indices, answers, strict=True):
                results[i] = answer
        done = [r for r in results if r is not None]
        if not return_exceptions:
            for result in done:
                if isinstance(result, LLMError):
                    raise result
        return done

    def _complete(self, request: Request) -> RawReply:
        return self.model_for(request.role)._complete(request)

    def set_routing_key(self, key: str) -> None:
        for llm in self._models():
            if hasattr(llm, "set_routing_key"):
                llm.set_routing_key(key)

    @property
    def probe(self) -> Any:
        return getattr(self.default, "probe", None)

    @property
    def parameter_count(self) -> int | None:
        return self.default.parameter_count

    @property
    def context_length(self) -> int | None:
        return self.default.context_length

    @property
    def model_context(self) -> int | None:
        return self.default.model_context

    def token_counter(self) -> TokenCounter | None:
        return self.default.token_counter()

    def close(self) -> None:
        for llm in self._models():
            llm.close()
