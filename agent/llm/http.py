"""Bounded HTTP to a model server: every call ends within its time budget and size cap.

A server is outside fabula's control: it may never answer, answer forever, send garbage, or
ask to be retried later. Here each call has one total time budget (retries and waits
included), a cap on the response size, and a retry policy that retries only what is safe
to retry: a refused connection or a 5xx/429 (honouring Retry-After), never a read timeout
(the server may still be working on the request; sending it again doubles the load and the
wait). Every failure is one line that names the endpoint with any credentials removed.
"""

from __future__ import annotations

import ipaddress
import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import httpx

from agent.llm.types import AuthenticationError, EndpointUnavailableError, LLMError

_RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class HttpLimits:
    """How long and how much one call may take."""

    call_budget_s: float = 600.0
    """Total wall time of one call, every attempt and wait included."""
    connect_timeout_s: float = 5.0
    max_retries: int = 3
    backoff_s: float = 0.5
    max_response_bytes: int = 32 * 2**20

    def __post_init__(self) -> None:
        if not self.call_budget_s > 0 or self.call_budget_s != self.call_budget_s:
            raise ValueError(f"the call time budget must be > 0 seconds, got {self.call_budget_s}")
        if self.max_retries < 0 or self.max_response_bytes < 1024:
            raise ValueError("max_retries must be >= 0 and max_response_bytes >= 1024")


def redact_url(url: str) -> str:
    """``url`` without credentials: user:password and query values become ``***``."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        return re.sub(r"//[^@/]*@", "//***@", url.split("?")[0])
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = "&".join(f"{p.split('=')[0]}=***" for p in parts.query.split("&") if p) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def normalize_base_url(url: str) -> str:
    """Accept ``http://host:port``, ``.../v1`` or ``.../v1/``; return ``.../v1``.

    The URL is checked here (scheme, host, port, IP literals) so that a malformed one is
    one clear line before any request, never a traceback from deep inside the client.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError("the endpoint URL is empty")
    url = url.strip().rstrip("/")
    shown = redact_url(url)
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"endpoint must start with http:// or https://, got {shown!r}")
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise ValueError(f"endpoint {shown!r} is not a valid URL ({exc})") from None
    if not host:
        raise ValueError(f"endpoint {shown!r} has no host")
    if re.fullmatch(r"[0-9.]+", host) or ":" in host:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(f"endpoint {shown!r}: {host} is not a valid IP address") from None
    if port == 0:
        raise ValueError(f"endpoint {shown!r}: port 0 is not a server port")
    try:
        httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        raise ValueError(f"endpoint {shown!r} is not a valid URL ({exc})") from None
    path = parts.path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def one_line(text: str, limit: int = 200) -> str:
    """A server-provided text as a short single line (quoted when it is not plain)."""
    text = " ".join(str(text).split())
    return text[:limit] + ("..." if len(text) > limit else "")


class _Deadline(Exception):
    pass


class BoundedClient:
    """JSON over HTTP within :class:`HttpLimits`; raises :class:`LLMError` subclasses only."""

    def __init__(self, url: str, *, headers: dict[str, str], limits: HttpLimits, concurrency: int) -> None:
        parts = urlsplit(url)
        self.base_url = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        self._url, self._headers = url, headers
        self.shown = redact_url(url)
        self.limits = limits
        self._secrets: list[str] = []
        self.hide(url)
        self._client = httpx.Client(
            base_url=self.base_url,
            params=dict(parse_qsl(parts.query)),  # a key in the query string travels on every request
            headers=headers,
            timeout=httpx.Timeout(limits.call_budget_s, connect=limits.connect_timeout_s),
            limits=httpx.Limits(max_connections=max(concurrency, 1) * 2),
        )

    def close(self) -> None:
        self._client.close()

    def set_header(self, name: str, value: str) -> None:
        """Send ``name: value`` with every later request (a run's routing key, set once the run exists)."""
        self._headers[name] = value
        self._client.headers[name] = value

    def at_root(self, limits: HttpLimits) -> BoundedClient:
        """A client for the server's root, beside ``/v1`` (vLLM's ``/tokenize``), with the same
        credentials and its own ``limits``."""
        parts = urlsplit(self._url)
        path = parts.path.rstrip("/")
        path = path[:-3] if path.endswith("/v1") else path
        return BoundedClient(
            urlunsplit((parts.scheme, parts.netloc, path, parts.query, "")),
            headers=self._headers,
            limits=limits,
            concurrency=1,
        )

    def hide(self, url: str) -> None:
        """Never show the credentials in ``url`` (user:password, query values) in a message."""
        try:
            parts = urlsplit(url)
        except ValueError:
            return
        found = [parts.username, parts.password] + [value for _, value in parse_qsl(parts.query)]
        self._secrets = sorted({s for s in [*self._secrets, *found] if s and len(s) >= 3}, key=len, reverse=True)

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def request_json(
        self, method: str, path: str, *, body: Any = None, budget_s: float | None = None, retry: bool = True
    ) -> Any:
        """One call: the decoded JSON reply, or an :class:`LLMError` naming what went wrong."""
        try:
            _, data = self._request(method, path, body=body, budget_s=budget_s, retry=retry, watch=None)
            return self._decode(data, f"{method} {path}")
        except LLMError as exc:
            raise type(exc)(self.scrub(str(exc))) from None

    def request_stream(self, method: str, path: str, *, body: Any, watch: Callable[[bytes], bool]) -> Any:
        """One call asked as a stream: a server-sent-events reply is fed to ``watch`` chunk by chunk
        until it ends or ``watch`` says stop (the connection is then closed, and a vLLM server
        aborts the request); returns ``None`` then. A server that answers with plain JSON instead
        (it ignored ``stream``) gets its reply decoded and returned, as :meth:`request_json` would.
        The same budget, cap and retries as any call; a retried stream starts ``watch`` over
        (``watch(b"")`` marks each new attempt)."""
        try:
            streamed, data = self._request(method, path, body=body, budget_s=None, retry=True, watch=watch)
            return None if streamed else self._decode(data, f"{method} {path}")
        except LLMError as exc:
            raise type(exc)(self.scrub(str(exc))) from None

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any,
        budget_s: float | None,
        retry: bool,
        watch: Callable[[bytes], bool] | None,
    ) -> tuple[bool, bytes]:
        """``(streamed, data)``: whether ``watch`` read the reply as a stream, and the reply's bytes."""
        limits = self.limits
        budget = min(budget_s or limits.call_budget_s, limits.call_budget_s)
        deadline = time.monotonic() + budget
        what = f"{method} {path}"
        last_problem = "no attempt made"
        attempts = limits.max_retries + 1 if retry else 1
        for attempt in range(attempts):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                status, headers, data, streamed = self._attempt(method, path, body, remaining, deadline, watch)
            except (
                httpx.ConnectError,
                httpx.ConnectTimeout,
                httpx.RemoteProtocolError,
                httpx.ReadError,
                httpx.WriteError,
                httpx.PoolTimeout,
            ) as exc:
                last_problem = _exc_text(exc)
                wait = limits.backoff_s * (2**attempt) * (1 + random.random() / 4)
            except (httpx.ReadTimeout, httpx.WriteTimeout, _Deadline):
                raise EndpointUnavailableError(
                    f"endpoint {self.shown} gave no complete reply to {what} within the {budget:.0f} s "
                    "call budget (not retried: it may still be working; raise --call-timeout for slow models)"
                ) from None
            except httpx.HTTPError as exc:
                raise LLMError(f"endpoint {self.shown}: {what} failed: {_exc_text(exc)}") from None
            else:
                if status < 400:
                    return streamed, data
                problem = f"HTTP {status}: {error_text(data)}"
                if status in (401, 403):
                    raise AuthenticationError(
                        f"endpoint {self.shown} refused {what}: {problem} (check --api-key or FABULA_API_KEY)"
                    )
                if status not in _RETRYABLE_STATUS:
                    raise LLMError(f"endpoint {self.shown} refused {what}: {problem}")
                last_problem = problem
                wait = limits.backoff_s * (2**attempt) * (1 + random.random() / 4)
                asked = retry_after_s(headers.get("retry-after"))
                if asked is not None:
                    wait = asked
                    if attempt + 1 < attempts and asked > deadline - time.monotonic():
                        raise EndpointUnavailableError(
                            f"endpoint {self.shown} asked to retry {what} after {asked:.0f} s, beyond what is "
                            f"left of the {budget:.0f} s call budget ({problem})"
                        )
            if attempt + 1 < attempts:
                time.sleep(max(0.0, min(wait, deadline - time.monotonic())))
        raise EndpointUnavailableError(
            f"endpoint {self.shown} unavailable after {attempt + 1} attempt{'s' if attempt else ''} "
            f"({what}, {budget:.0f} s call budget; last: {one_line(last_problem)})"
        )

    def _attempt(
        self,
        method: str,
        path: str,
        body: Any,
        remaining: float,
        deadline: float,
        watch: Callable[[bytes], bool] | None,
    ) -> tuple[int, httpx.Headers, bytes, bool]:
        timeout = httpx.Timeout(remaining, connect=min(self.limits.connect_timeout_s, remaining))
        cap = self.limits.max_response_bytes
        with self._client.stream(method, path, json=body, timeout=timeout) as response:
            declared = response.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > cap:
                raise LLMError(
                    f"endpoint {self.shown}: the reply to {method} {path} declares {int(declared)} "
                    f"bytes, over the {cap}-byte cap"
                )
            event_stream = response.status_code < 400 and response.headers.get("content-type", "").startswith(
                "text/event-stream"
            )
            stream_to = watch if event_stream else None  # None: the reply's bytes are kept, not watched
            if stream_to is not None:
                stream_to(b"")  # a new attempt: whatever an earlier one streamed is void
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > cap:
                    raise LLMError(
                        f"endpoint {self.shown}: the reply to {method} {path} passed the {cap}-byte "
                        "cap; stopped reading"
                    )
                if time.monotonic() > deadline:
                    raise _Deadline
                if stream_to is not None:
                    if stream_to(chunk):  # the caller has what it needs: leaving closes the connection
                        break
                else:
                    chunks.append(chunk)
            return response.status_code, response.headers, b"".join(chunks), stream_to is not None

    def _decode(self, data: bytes, what: str) -> Any:
        try:
            return json.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise LLMError(
                f"endpoint {self.shown} answered {what} with something that is not JSON: {one_line(repr(data[:200]))}"
            ) from None
        except RecursionError:  # e.g. [[[[...]]]] 100,000 deep: valid JSON no reply is shaped like
            raise LLMError(
                f"endpoint {self.shown} answered {what} with JSON nested too deeply to be a reply: "
                f"{one_line(repr(data[:60]))}"
            ) from None


def retry_after_s(value: str | None) -> float | None:
    """Seconds asked by a Retry-After header (delta-seconds or an HTTP date), or ``None``."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return max(0.0, seconds) if seconds == seconds else None


def error_text(data: bytes) -> str:
    """The message inside an error reply, as one short line."""
    try:
        parsed = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return one_line(data[:300].decode("utf-8", "replace"))
    error = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
    if isinstance(error, dict):
        return one_line(str(error.get("message") or error), 300)
    return one_line(str(error), 300)


def _exc_text(exc: Exception) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {one_line(text)}" if text else type(exc).__name__
