"""Provider batches: single-turn calls sent through OpenAI's and Anthropic's batch APIs.

OpenAI: ``POST /v1/files`` (a JSONL of requests, purpose ``batch``), ``POST /v1/batches``,
poll ``GET /v1/batches/{id}``, then read ``GET /v1/files/{output_file_id}/content`` and the
error file; each line carries the request's ``custom_id``. Anthropic: ``POST
/v1/messages/batches``, poll ``GET /v1/messages/batches/{id}`` until ``processing_status``
is ``ended``, then read the JSONL at ``results_url`` (``result.type``: ``succeeded``,
``errored``, ``canceled``, ``expired``).

Requests wait ``delay`` seconds (or until ``size`` are queued) per provider, server and
model, then go as one batch, split to the provider's limits. Polls come after 1 s, then at
doubling intervals up to 30 s. Before the first poll, the batch id is written to the store
beside each invocation it carries (keyed by the invocation's address and fingerprint), so a
run killed while it waits resumes by polling the same batch, never by submitting again.
A request that failed inside a batch fails only its own call; a batch that expired keeps
the answers it had. Cost is the batch price: half the listed price.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import weakref
from typing import Any

from fxtr.models._batch_settings import (
    LIMITS,
    BatchSettings,
    _run_default,
    check_settings,
    configure,
    provider_of,
    settings_for,
)
from fxtr.models._classify import category_from_http
from fxtr.models._slots import give_back
from fxtr.models._types import ModelCallError, ModelCallFailure, ModelRequest, ModelResponse

log = logging.getLogger("fxtr")

__all__ = [
    "BATCH_PRICE",
    "LIMITS",
    "BatchSettings",
    "_run_default",
    "batch_generate",
    "check_settings",
    "configure",
    "settings_for",
    "split",
]

BATCH_PRICE = 0.5
"""The batch price as a share of the listed one (both providers list batches at 50%)."""


FIRST_POLL = 1.0
MAX_POLL = 30.0
POINTER = "fxtr-batch:"
"""The store key prefix of the batch an invocation's request went into."""


def custom_id(key: str) -> str:
    """A request's id inside its batch (both providers accept ``[A-Za-z0-9_-]{1,64}``)."""
    return "fxtr-" + hashlib.sha256(key.encode()).hexdigest()[:40]


def _failure(category: str, description: str, status: int | None = None) -> ModelCallError:
    return ModelCallError(
        ModelCallFailure(category=category, description=description, status_code=status)
    )


@dataclasses.dataclass
class _Pending:
    cid: str
    body: dict[str, Any]
    future: asyncio.Future[Any]


class _Queue:
    """The requests of one provider, server and model waiting to go as a batch."""

    def __init__(self, api: Any, provider: str, settings: BatchSettings, store: Any) -> None:
        self.api = api
        self.provider = provider
        self.settings = settings
        self.store = store
        self.pending: list[_Pending] = []
        self.timer: asyncio.TimerHandle | None = None

    def add(self, item: _Pending) -> None:
        self.pending.append(item)
        if len(self.pending) >= self.settings.size:
            self.flush()
        elif self.timer is None:
            loop = asyncio.get_running_loop()
            self.timer = loop.call_later(self.settings.delay, self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        items, self.pending = self.pending, []
        if not items:
            return
        for part in split(items, self.provider, self.settings.size):
            asyncio.get_running_loop().create_task(self._send(part))

    async def _send(self, items: list[_Pending]) -> None:
        try:
            batch_id = await submit(self.api, self.provider, items)
        except ModelCallError as exc:
            for item in items:
                if not item.future.done():
                    item.future.set_exception(exc)
            return
        except Exception as exc:  # a transport error: every request of it failed
            err = _failure("connection", f"the batch could not be submitted: {exc!r}")
            for item in items:
                if not item.future.done():
                    item.future.set_exception(err)
            return
        for item in items:
            _remember(self.store, item.cid, self.provider, batch_id)
        results = await _poller(self.api, self.provider, batch_id)
        for item in items:
            _deliver(self.store, item, results)


def split(items: list[_Pending], provider: str, size: int) -> list[list[_Pending]]:
    """Batches within the provider's request and byte limits (and ``size``).

    A request alone over the byte limit fails at once, before anything is sent.
    """
    most, max_bytes = LIMITS[provider]
    most = min(most, size)
    parts: list[list[_Pending]] = []
    current: list[_Pending] = []
    used = 0
    for item in items:
        n = len(json.dumps(item.body).encode()) + 200  # the line's envelope, generously
        if n > max_bytes:
            item.future.set_exception(
                _failure(
                    "payload_too_large",
                    f"this request is {n:,} bytes, over the {max_bytes:,} bytes a {provider} "
                    "batch may hold; send it without batch=True",
                )
            )
            continue
        if current and (len(current) >= most or used + n > max_bytes):
            parts.append(current)
            current, used = [], 0
        current.append(item)
        used += n
    if current:
        parts.append(current)
    return parts


def _remember(store: Any, cid: str, provider: str, batch_id: str) -> None:
    if store is None:
        return
    try:
        store.set_last_job(POINTER + cid, json.dumps({"batch": batch_id, "provider": provider}))
    except Exception as exc:  # the batch still runs; a kill would resubmit this request
        log.warning("the batch id of %s could not be stored: %s", cid, exc)


def _recalled(store: Any, cid: str) -> str | None:
    if store is None:
        return None
    try:
        text = store.get_last_job(POINTER + cid)
    except Exception:
        return None
    if not text:
        return None
    try:
        batch_id = json.loads(text).get("batch")
    except (ValueError, AttributeError):
        return None
    return batch_id if isinstance(batch_id, str) else None


def _forget(store: Any, cid: str) -> None:
    if store is not None:
        try:
            store.set_last_job(POINTER + cid, "")
        except Exception:  # pragma: no cover - the next run would poll a finished batch
            pass


def _deliver(store: Any, item: _Pending, results: dict[str, Any]) -> None:
    outcome = results.get(item.cid)
    if outcome is None:
        outcome = _failure(
            "batch_missing", f"the batch ended without a result for request {item.cid}"
        )
    if isinstance(outcome, ModelCallError):
        _forget(store, item.cid)  # a resume asks again
        if not item.future.done():
            item.future.set_exception(outcome)
    elif not item.future.done():
        item.future.set_result(outcome)


# the providers' endpoints ------------------------------------------------------------


async def submit(api: Any, provider: str, items: list[_Pending]) -> str:
    """Send one batch; its id (over the model API's shared HTTP client)."""
    return await _submit(api._client, api, provider, items)


async def _submit(client: Any, api: Any, provider: str, items: list[_Pending]) -> str:
    headers = api._headers()
    if provider == "openai":
        path = api._path()
        lines = "".join(
            json.dumps({"custom_id": i.cid, "method": "POST", "url": "/v1" + path, "body": i.body})
            + "\n"
            for i in items
        )
        http = await client.post(
            api.base_url + "/files",
            headers=headers,
            data={"purpose": "batch"},
            files={"file": ("fxtr-batch.jsonl", lines.encode(), "application/jsonl")},
        )
        file = _json(api, http, "uploading the batch file")
        http = await client.post(
            api.base_url + "/batches",
            headers=headers,
            json={
                "input_file_id": file["id"],
                "endpoint": "/v1" + path,
                "completion_window": "24h",
            },
        )
        return str(_json(api, http, "creating the batch")["id"])
    http = await client.post(
        api.base_url + "/v1/messages/batches",
        headers=headers,
        json={"requests": [{"custom_id": i.cid, "params": i.body} for i in items]},
    )
    return str(_json(api, http, "creating the batch")["id"])


def _json(api: Any, http: Any, doing: str) -> dict[str, Any]:
    try:
        data = http.json()
    except ValueError:
        data = http.text
    if http.status_code >= 400:
        category = category_from_http(http.status_code, data)
        description = f"{doing} failed: HTTP {http.status_code}: {str(data)[:300]}"
        if http.status_code == 401 and not api._api_key:
            description += f" ({api._no_key()})"
        raise _failure(category, description, http.status_code)
    if not isinstance(data, dict):
        category = "server_error"
        raise _failure(category, f"{doing}: the answer is not a JSON object")
    return data


_POLLERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Task[Any]]] = (
    weakref.WeakKeyDictionary()
)


def _poller(api: Any, provider: str, batch_id: str) -> asyncio.Task[dict[str, Any]]:
    """One poll loop per batch (every request of it waits on the same one)."""
    table = _POLLERS.setdefault(asyncio.get_running_loop(), {})
    task = table.get(batch_id)
    if task is None:
        task = table[batch_id] = asyncio.get_running_loop().create_task(
            _wait(api, provider, batch_id)
        )
    return task


async def _wait(api: Any, provider: str, batch_id: str) -> dict[str, Any]:
    """Poll a batch until it ends; each request's response or failure, by custom id."""
    return await _poll(api._client, api, provider, batch_id)


async def _poll(client: Any, api: Any, provider: str, batch_id: str) -> dict[str, Any]:
    headers = api._headers()
    delay = FIRST_POLL
    if provider == "openai":
        url = f"{api.base_url}/batches/{batch_id}"
        done = {"completed", "expired", "failed", "cancelled"}
        key = "status"
    else:
        url = f"{api.base_url}/v1/messages/batches/{batch_id}"
        done = {"ended"}
        key = "processing_status"
    while True:
        await asyncio.sleep(delay)
        delay = min(MAX_POLL, delay * 2)
        try:
            batch = _json(api, await client.get(url, headers=headers), f"polling batch {batch_id}")
        except ModelCallError as exc:
            if exc.failure.category in ("not_found", "auth", "permission"):
                return _all_failed(exc)
            log.warning("polling batch %s: %s (will poll again)", batch_id, exc)
            continue
        except Exception as exc:  # a transport error: poll again
            log.warning("polling batch %s: %r (will poll again)", batch_id, exc)
            continue
        if batch.get(key) in done:
            break
    if provider == "openai":
        return await _openai_results(client, api, batch)
    return await _anthropic_results(client, api, batch)


class _AllFailed(dict[str, Any]):
    """Results where every request failed the same way."""

    def __init__(self, error: ModelCallError) -> None:
        super().__init__()
        self.error = error

    def get(self, key: str, default: Any = None) -> Any:
        return self.error


def _all_failed(error: ModelCallError) -> dict[str, Any]:
    return _AllFailed(error)


async def _lines(client: Any, api: Any, url: str) -> list[dict[str, Any]]:
    http = await client.get(url, headers=api._headers())
    if http.status_code >= 400:
        raise _failure(
            category_from_http(http.status_code, http.text),
            f"reading batch results failed: HTTP {http.status_code}",
            http.status_code,
        )
    out = []
    for line in http.text.splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                log.warning("a batch result line is not JSON: %.200s", line)
    return out


def _response(api: Any, body: dict[str, Any]) -> ModelResponse | ModelCallError:
    try:
        parsed = api._parse(body)
    except ModelCallError as exc:
        return exc
    cost = api._cost(body, parsed.usage)
    return ModelResponse(
        output=parsed.output,
        usage=parsed.usage,
        cost=None if cost is None else cost * BATCH_PRICE,
        stop_reason=parsed.stop_reason,
        model=parsed.model or api.model_name,
    )


async def _openai_results(client: Any, api: Any, batch: dict[str, Any]) -> dict[str, Any]:
    status = batch.get("status")
    results: dict[str, Any] = {}
    if status == "failed":
        errors = (batch.get("errors") or {}).get("data") or []
        text = "; ".join(str(e.get("message")) for e in errors[:3]) or "no reason given"
        return _all_failed(_failure("batch_failed", f"the batch failed validation: {text}"))
    for field in ("output_file_id", "error_file_id"):
        file_id = batch.get(field)
        if not file_id:
            continue
        for row in await _lines(client, api, f"{api.base_url}/files/{file_id}/content"):
            cid = str(row.get("custom_id"))
            response = row.get("response") or {}
            error = row.get("error")
            code = response.get("status_code")
            if error:
                category = (
                    "batch_expired"
                    if error.get("code") == "batch_expired"
                    else (category_from_http(None, {"error": error}))
                )
                results[cid] = _failure(category, f"in batch {batch.get('id')}: {error}")
            elif code == 200 and isinstance(response.get("body"), dict):
                results[cid] = _response(api, response["body"])
            else:
                body = response.get("body")
                results[cid] = _failure(
                    category_from_http(code, body), f"HTTP {code} in batch: {body}", code
                )
    if status in ("expired", "cancelled"):
        category = "batch_expired" if status == "expired" else "batch_cancelled"
        return _Rest(results, _failure(category, f"batch {batch.get('id')} {status}"))
    return results


class _Rest(dict[str, Any]):
    """Results of a batch that ended early: requests without one fail with ``error``."""

    def __init__(self, results: dict[str, Any], error: ModelCallError) -> None:
        super().__init__(results)
        self.error = error

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key, self.error)


_ANTHROPIC_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
"""The HTTP status of each Anthropic error type (an errored batch result carries the type)."""


async def _anthropic_results(client: Any, api: Any, batch: dict[str, Any]) -> dict[str, Any]:
    url = batch.get("results_url")
    if not url:
        return _all_failed(_failure("batch_missing", f"batch {batch.get('id')} has no results"))
    results: dict[str, Any] = {}
    for row in await _lines(client, api, url):
        cid = str(row.get("custom_id"))
        result = row.get("result") or {}
        kind = result.get("type")
        if kind == "succeeded" and isinstance(result.get("message"), dict):
            results[cid] = _response(api, result["message"])
        elif kind == "errored":
            error = result.get("error") or {}
            nested = error.get("error")
            inner: dict[str, Any] = nested if isinstance(nested, dict) else error
            status = _ANTHROPIC_STATUS.get(str(inner.get("type")))
            results[cid] = _failure(
                category_from_http(status, error),
                f"in batch {batch.get('id')}: {inner.get('type')}: {inner.get('message')}",
                status,
            )
        else:  # canceled, expired
            results[cid] = _failure(f"batch_{kind}", f"request {kind} in batch {batch.get('id')}")
    return results


# the entry point ---------------------------------------------------------------------

_QUEUES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, ...], _Queue]] = (
    weakref.WeakKeyDictionary()
)


async def batch_generate(
    api: Any,
    request: ModelRequest,
    *,
    key: str,
    settings: BatchSettings,
    store: Any = None,
    slot: asyncio.Semaphore | None = None,
) -> ModelResponse:
    """Answer one request through its provider's batch API.

    Args:
        api: an ``OpenAIChatAPI``/``OpenAIResponsesAPI`` or ``AnthropicMessagesAPI``.
        request: a single-turn request.
        key: what identifies the request across runs (the invocation's address and
            fingerprint): a run that finds a batch recorded under it polls that batch.
        settings: the batch size and delay.
        store: where the batch id is kept (the project store), or ``None``.
        slot: a concurrency slot the caller holds (the run's): given back while the request
            waits for its batch, taken again before returning, so that the calls waiting
            for a batch do not bound how many can join it.

    Raises:
        ModelCallError: the request failed inside its batch (or the batch failed).
    """
    from fxtr.models._budget import spending
    from fxtr.models._observe import observe

    provider = provider_of(api)
    if provider is None:
        msg = f"{api!r} has no batch API; batches go through OpenAI's or Anthropic's clients."
        raise TypeError(msg)
    cid = custom_id(key)
    async with observe(api.model_name, request, api.provider) as call:
        async with spending(api, request) as spent:
            recalled = _recalled(store, cid)
            if recalled is not None:
                results = await _poller(api, provider, recalled)
                future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                _deliver(store, _Pending(cid, {}, future), results)
            else:
                future = asyncio.get_running_loop().create_future()
                table = _QUEUES.setdefault(asyncio.get_running_loop(), {})
                qkey = (provider, api.base_url, api.model_name, str(settings))
                queue = table.get(qkey)
                if queue is None:
                    queue = table[qkey] = _Queue(api, provider, settings, store)
                queue.add(_Pending(cid, api._body(request), future))
            response: ModelResponse = await _waiting(future, slot)
            spent.append(response)
        call.response = response
        return response


async def _waiting(future: asyncio.Future[Any], slot: asyncio.Semaphore | None) -> Any:
    """The future's result, with ``slot`` given back meanwhile."""
    if slot is None:
        return await future
    give_back(slot)
    try:
        return await future
    finally:
        # taken again even when cancelled, so that the caller's own release balances it
        await asyncio.shield(slot.acquire())
