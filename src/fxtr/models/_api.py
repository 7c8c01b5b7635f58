"""The model API base over httpx, failures from responses, and ``generate_with_retries``."""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import json
import os
import random
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import httpx

from fxtr.models._budget import spending
from fxtr.models._classify import category_from_http
from fxtr.models._limiter import limited
from fxtr.models._observe import observe
from fxtr.models._prices import cost_of
from fxtr.models._types import (
    ModelCallError,
    ModelCallFailure,
    ModelRequest,
    ModelResponse,
    RetryConfig,
    Usage,
)

DEFAULT_FAILURE_CATEGORIES_TO_RETRY: frozenset[str] = frozenset(
    {"rate_limit", "overloaded", "server_error", "timeout", "connection"}
)
"""Categories a later attempt may not hit; quota, billing, refusals and bad requests are final."""

call_limiter: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "fxtr_call_limiter", default=None
)
"""Set on Dask workers: ``limiter(provider)`` bounds concurrent calls across the cluster."""

_KEY_LIKE = re.compile(r"(sk-(ant-)?[A-Za-z0-9_\-\*]{6,}|Bearer\s+\S+)")


def redact(text: str, secret: str | None) -> str:
    """Remove an API key (and anything shaped like one) from text that may be shown."""
    if secret:
        text = text.replace(secret, "[redacted]")
    return _KEY_LIKE.sub("[redacted]", text)


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(0.0, parsed.timestamp() - time.time())


class Secret:
    """A credential that never shows itself in a repr, a log line or a traceback's locals."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value

    def get(self) -> str | None:
        """The credential itself, for the request header only."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('[redacted]')" if self._value else "Secret(None)"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        msg = "A Secret cannot be pickled; credentials stay in the environment."
        raise TypeError(msg)


class ModelAPI:
    """A model behind an HTTP API: one shared ``httpx.AsyncClient``, a concurrency limit.

    Subclasses build the provider's request body and read its response; this class sends it,
    turns HTTP and transport failures into ``ModelCallError`` with a ``ModelCallFailure``,
    prices the usage, and reports the call to the execution graph.
    """

    provider: ClassVar[str] = "http"
    env_key: ClassVar[str | None] = None
    default_base_url: ClassVar[str] = ""
    base_url_env: ClassVar[str | None] = None
    """The variable naming the base URL when ``base_url`` is not given, as the SDK reads it."""

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 600.0,
        max_concurrency: int = 64,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.model_name = model_name
        from_env = os.environ.get(self.base_url_env) if self.base_url_env else None
        self.base_url = (base_url or from_env or self.default_base_url).rstrip("/")
        self._secret = Secret(
            api_key
            if api_key is not None
            else (os.environ.get(self.env_key) if self.env_key else None)
        )
        if api_key is not None:  # a key not from the environment: redacted from all we write
            from fxtr.secrets import register

            register(api_key)
        self._client = http_client or httpx.AsyncClient(timeout=timeout)
        self._owns_client = http_client is None
        self._limit = asyncio.Semaphore(max_concurrency)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_name!r}, base_url={self.base_url!r})"

    @property
    def _api_key(self) -> str | None:
        return self._secret.get()

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _path(self) -> str:
        raise NotImplementedError

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, data: dict[str, Any]) -> ModelResponse:
        raise NotImplementedError

    def _fail(
        self,
        category: str,
        description: str,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> ModelCallError:
        return ModelCallError(
            ModelCallFailure(
                category=category,
                description=redact(description, self._secret.get()),
                status_code=status,
                retry_after=retry_after,
            )
        )

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Send one request; no retries.

        Raises:
            ModelCallError: the provider refused, failed, or could not be reached; its
                ``failure`` says the category.
        """
        limiter = call_limiter.get()
        async with observe(self.model_name, request, self.provider) as call:
            async with spending(self, request) as spent:
                if limiter is None:
                    async with limited(self.base_url, self.model_name):
                        response = await self._send(request)
                else:
                    async with limiter(self.provider):
                        response = await self._send(request)
                spent.append(response)
            call.response = response
            return response

    async def _send(self, request: ModelRequest) -> ModelResponse:
        body = self._body(request)
        url = self.base_url + self._path()
        async with self._limit:
            try:
                http = await self._client.post(url, json=body, headers=self._headers())
            except httpx.TimeoutException as exc:
                raise self._fail("timeout", f"{type(exc).__name__}: {exc}") from None
            except httpx.TransportError as exc:
                raise self._fail("connection", f"{type(exc).__name__}: {exc}") from None
        try:
            data = http.json()
        except ValueError:
            data = http.text
        if http.status_code >= 400:
            category = category_from_http(http.status_code, data)
            raise self._fail(
                category,
                f"HTTP {http.status_code}: {_message(data)}",
                http.status_code,
                retry_after_seconds(http.headers),
            )
        if not isinstance(data, dict):
            raise self._fail(
                "server_error", f"HTTP {http.status_code} with a body that is not JSON"
            )
        response = self._parse(data)
        cost = self._cost(data, response.usage)
        return ModelResponse(
            output=response.output,
            usage=response.usage,
            cost=cost,
            stop_reason=response.stop_reason,
            model=response.model or self.model_name,
        )

    def _cost(self, data: dict[str, Any], usage: Usage) -> float | None:
        """The price of a call (genai-prices, or a ``set_price`` override)."""
        return cost_of(self.model_name, usage, provider=self.provider, api_url=self.base_url)

    async def aclose(self) -> None:
        """Close the HTTP client this API opened."""
        if self._owns_client:
            await self._client.aclose()


def _message(data: Any) -> str:
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            parts = [str(err.get(k)) for k in ("type", "code") if err.get(k)]
            message = err.get("message") or json.dumps(err)[:300]
            return f"{' / '.join(parts)}: {message}" if parts else str(message)
        return str(err)[:300]
    return str(data)[:300]


async def generate_with_retries(
    api: Any,
    request: ModelRequest,
    retry: RetryConfig | None = None,
    failure_categories_to_retry: frozenset[str] | set[str] = DEFAULT_FAILURE_CATEGORIES_TO_RETRY,
    *,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: Callable[[], float] = random.random,
) -> ModelResponse | ModelCallFailure:
    """Call a model, retrying the categories a later attempt may not hit.

    Waits ``Retry-After`` when the provider says it, else an exponential backoff with jitter,
    within ``retry.total_budget`` seconds.

    Returns:
        The response, or the last ``ModelCallFailure`` when it gives up. It never raises
        for a provider error.
    """
    retry = retry or RetryConfig()
    start = clock()
    attempt = 0
    while True:
        attempt += 1
        try:
            response: ModelResponse = await api.generate(request)
            return response
        except ModelCallError as exc:
            failure = exc.failure
        if failure.category not in failure_categories_to_retry or attempt >= retry.max_attempts:
            return failure
        delay = failure.retry_after
        if delay is None:
            delay = min(retry.max_delay, retry.initial_delay * 2 ** (attempt - 1))
            delay += delay * retry.jitter * rng()
        if retry.total_budget is not None and clock() - start + delay > retry.total_budget:
            return failure
        await sleep(delay)


def usage_of(input_tokens: Any, output_tokens: Any, cached: Any = 0) -> Usage:
    """A ``Usage`` from provider numbers that may be missing."""
    return Usage(
        input_tokens=int(input_tokens or 0),
        output_tokens=int(output_tokens or 0),
        cached_input_tokens=int(cached or 0),
    )
