"""The ``endpoint`` backend: any OpenAI-compatible chat server, vLLM first.

Constraints travel in the fields current vLLM enforces: ``response_format`` (json_schema,
strict) for JSON, and the top-level ``structured_outputs`` object (what the OpenAI SDK
sends as ``extra_body``) for regex and choice. The removed ``guided_*`` fields are never
sent: vLLM >= 0.12 ignores them silently and answers unconstrained.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from agent.llm.base import LLM, Request
from agent.llm.sampling import Sampling
from agent.llm.types import (
    Completion,
    EndpointUnavailableError,
    LLMError,
    RawReply,
    ThinkingMode,
    UnsupportedSettingError,
    Usage,
)

_RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}


def normalize_base_url(url: str) -> str:
    """Accept ``http://host:port``, ``.../v1`` or ``.../v1/``; return ``.../v1``."""
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"endpoint must start with http:// or https://, got {url!r}")
    return url if url.endswith("/v1") else url + "/v1"


class EndpointLLM(LLM):
    """Chat completions over HTTP with bounded retries and concurrent batches."""

    backend = "endpoint"

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        thinking: ThinkingMode = "auto",
        timeout_s: float = 600.0,
        connect_timeout_s: float = 5.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        concurrency: int = 8,
    ) -> None:
        self.base_url = normalize_base_url(base_url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            limits=httpx.Limits(max_connections=max(concurrency, 1) * 2),
        )
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.concurrency = max(concurrency, 1)
        super().__init__(model or self._first_served_model(), thinking=thinking)

    def close(self) -> None:
        self._client.close()

    def served_models(self) -> list[str]:
        """The model names the server offers (``GET /v1/models``)."""
        data = self._request("GET", "/models")
        return [m["id"] for m in data.get("data", [])]

    def _first_served_model(self) -> str:
        models = self.served_models()
        if not models:
            raise LLMError(f"endpoint {self.base_url} serves no model")
        return models[0]

    # -- LLM -------------------------------------------------------------------------------
    def _complete(self, request: Request) -> RawReply:
        data = self._request("POST", "/chat/completions", json=self.payload(request))
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"endpoint {self.base_url} returned no choice: {str(data)[:200]}") from exc
        usage = data.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return RawReply(
            text=message.get("content") or "",
            finish_reason=choice.get("finish_reason") or "unknown",
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                cached_prompt_tokens=int(details.get("cached_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
            ),
            model=data.get("model") or self.model,
            reasoning=message.get("reasoning_content") or message.get("reasoning"),
        )

    def _run_many(self, requests: list[Request]) -> list[Completion | LLMError]:
        """Send independent requests at once so the server's scheduler batches them."""

        def one(request: Request) -> Completion | LLMError:
            try:
                return self._run(request)
            except LLMError as exc:
                return exc

        if len(requests) <= 1:
            return [one(r) for r in requests]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            return list(pool.map(one, requests))

    def payload(self, request: Request) -> dict[str, Any]:
        """The JSON body for one request (public so tests can check the wire format)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
        if request.min_tokens:
            body["min_tokens"] = request.min_tokens
        if request.stop:
            body["stop"] = request.stop
        if request.seed is not None:
            body["seed"] = request.seed
        body.update(sampling_fields(request.sampling))
        if self.thinking != "auto":
            body["chat_template_kwargs"] = {"enable_thinking": self.thinking == "on"}
        constraint = request.constraint
        if constraint is not None:
            if constraint.kind == "json":
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": constraint.name, "schema": constraint.json_schema, "strict": True},
                }
            elif constraint.kind == "regex":
                body["structured_outputs"] = {"regex": constraint.pattern}
            else:
                body["structured_outputs"] = {"choice": list(constraint.options or ())}
        return body

    # -- HTTP with bounded retries -------------------------------------------------------
    def _request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        last_problem = "no attempt made"
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * (2 ** (attempt - 1)) * (1 + random.random() / 4))
            try:
                response = self._client.request(method, path, **kwargs)
            except (httpx.TransportError, httpx.TimeoutException) as exc:
                last_problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                continue
            if response.status_code in _RETRYABLE_STATUS:
                last_problem = f"HTTP {response.status_code}: {_error_text(response)}"
                continue
            if response.status_code >= 400:
                raise LLMError(
                    f"endpoint {self.base_url} refused {method} {path}: "
                    f"HTTP {response.status_code}: {_error_text(response)}"
                )
            try:
                return response.json()
            except ValueError as exc:
                raise LLMError(f"endpoint {self.base_url} answered non-JSON: {response.text[:200]!r}") from exc
        raise EndpointUnavailableError(
            f"endpoint {self.base_url} unavailable after {self.max_retries + 1} attempts ({last_problem})"
        )


def _error_text(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300].strip()
    error = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(error, dict):
        return str(error.get("message") or error)[:300]
    return str(error)[:300]


def sampling_fields(sampling: Sampling) -> dict[str, Any]:
    """The request fields for ``sampling``: the OpenAI ones (top_p, frequency and presence
    penalties) and vLLM's extra sampling parameters (repetition_penalty, top_k, min_p), which
    vLLM and SGLang read from the top level of the body. ``no_repeat_ngram_size`` has no server
    equivalent and is refused rather than silently dropped."""
    given = sampling.given()
    if "no_repeat_ngram_size" in given:
        raise UnsupportedSettingError("the endpoint backend cannot honour no_repeat_ngram_size (a transformers-only "
                                      "control); use repetition_penalty or frequency_penalty instead")
    return given
