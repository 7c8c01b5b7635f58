"""The failure classifier: from any exception to a provider category and a reason.

Two steps, both rules a reader can audit:

1. ``failure_category(error)``: the finer provider category (``rate_limit``, ``quota``,
   ``billing``, ``overloaded``, ...), read from a ``ModelCallFailure``, an HTTP status, the
   body's structured code fields and its message text (``httpx.HTTPStatusError``, any
   SDK-style error with ``status_code`` and ``body``, a botocore ``ClientError``), or a
   transport error (httpx's, or the openai/anthropic SDKs' ``APITimeoutError`` and
   ``APIConnectionError``, matched by class name and package). ``None`` for an error that
   carries none of these: user code that raised.
2. ``classify(error)``: the reason, from the category by ``REASON_OF_CATEGORY``. An error
   that carries no provider information (user code that raised, httpx's and the SDKs'
   transport errors included) is ``tool_error``; its category (``timeout``, ``connection``)
   is still kept.

``category_from_http(status, body, headers=None)`` decides in this order; the first rule that
fires wins:

1. the status says budget: every 429 (rate_limit; quota or billing when the body says so)
   and every 402 (billing, or quota);
2. the body's structured fields (``code``, ``type``, ``status``, ``__type``, ``reason``,
   ``finish_reason``, Gemini's ``blockReason``, an ``x-amzn-ErrorType`` header, an AWS
   event-stream exception key), whatever the status: refusal, content filter, context
   overflow, billing, quota, rate limit, overload, timeout;
3. the message text (``message``, ``detail``, ``error``, ``param`` strings, JSON or SSE
   documents kept as strings under any key, OpenRouter's ``metadata.raw``; links removed;
   English, Chinese and a few Japanese, Spanish and French phrasings): output cap
   (``max_tokens`` over what the model can produce, checked first so it is never taken for
   an overflow), context overflow, content filter, quota, billing, rate limit (not on a
   5xx), overload (not on a 4xx: capacity words do not override a client error); when none
   of these named anything and no rate is named, the wider families (``WIDER_FAMILIES``: a
   window, an output cap, a content block, a lapsed subscription in words of their own). A
   413 counts only a token-window or budget message; otherwise it is ``payload_too_large``
   (the provider's byte limit);
4. a code that names a provider failure (``api_error``, ``server_error``): ``server_error``;
5. the status alone (``STATUS_CATEGORY``; other 5xx ``server_error``, other 4xx
   ``invalid_request``, no status or 2xx ``unknown``).

Numbers quoted inside a body ("error code 429 returned by upstream") are never read as a
status, except where the body is all there is (a 200 stream event, or no status): there an
embedded ``code``/``status`` between 400 and 599 stands in for the missing one.

Who calls whom: this module holds the rule order and the public functions; the rule tables
and the reading of a body (codes, text, embedded status) are in
``fxtr.models._classify_text``, which only this module imports. Callers: the providers and
``fxtr.models._api`` (``category_from_http`` on a failed response), ``fxtr.tracing`` (which
re-exports ``classify`` and the reasons; ``fxtr.tracing._classify`` is a re-export shim), the
experiment engine and the Dask integration (``classify``, ``failure_category``). The one
import back into fxtr, ``ModelCallFailure``, is made on first use.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fxtr.models._classify_text import (
    CODE_RULES,
    MESSAGE_RULES,
    OUTPUT_LIMIT,
    SERVER_ERROR_CODE,
    URL,
    WIDER_FAMILIES,
    Phrases,
    Signals,
    body_signals,
)

REASONS = ("context_overflow", "budget", "tool_error", "stall", "refusal", "unknown")

REASON_OF_CATEGORY: dict[str, str] = {
    "rate_limit": "budget",
    "quota": "budget",
    "billing": "budget",
    "budget_exhausted": "budget",  # the run's own --fxtr-max-cost refused the call
    "context_overflow": "context_overflow",
    "refusal": "refusal",
    "content_filter": "refusal",
}
"""Categories that map to a reason other than ``unknown`` (every other category)."""

STATUS_CATEGORY: dict[int, str] = {
    400: "invalid_request",
    401: "auth",
    402: "billing",
    403: "permission",
    404: "not_found",
    408: "timeout",
    409: "conflict",
    413: "payload_too_large",
    422: "invalid_request",
    429: "rate_limit",
    500: "server_error",
    502: "server_error",
    503: "overloaded",
    504: "timeout",
    522: "timeout",
    524: "timeout",
    529: "overloaded",
}
"""Category by HTTP status when the body decides nothing."""


def _first(rules: Iterable[tuple[str, re.Pattern[str] | Phrases]], text: str) -> str | None:
    for category, rule in rules:
        if rule.search(text):
            return category
    return None


def _budget_kind(codes: str, text: str, default: str) -> str:
    """Which budget a 429 or 402 is about: billing, quota, or the status's default."""
    billing, quota, rate = CODE_RULES[3][1], CODE_RULES[4][1], CODE_RULES[5][1]
    if billing.search(codes):
        return "billing"
    if quota.search(codes):
        return "rate_limit" if rate.search(codes) else "quota"
    quota_text, billing_text, rate_text = (rule for _, rule in MESSAGE_RULES[2:5])
    if quota_text.search(text):
        return "quota"
    if default == "rate_limit" and rate_text.search(text):  # a 429 that says it is a rate
        return "rate_limit"
    return "billing" if billing_text.search(text) else default


def _by_status(status: int | None) -> str:
    if status is None or status < 400:
        return "unknown"
    known = STATUS_CATEGORY.get(status)
    if known is not None:
        return known
    return "server_error" if status >= 500 else "invalid_request"


def category_from_http(
    status: int | None, body: Any, headers: Mapping[str, str] | None = None
) -> str:
    """The provider category of an HTTP failure, from its status, body and headers.

    Args:
        status: the HTTP status, or ``None`` (or 200) for an error read from a stream event.
        body: the response body as sent: parsed JSON, text, bytes, or an SSE event stream.
        headers: the response headers, where the exception name travels (AWS).
    """
    signals = body_signals(body, headers) if body is not None or headers else Signals()
    codes = " ".join(signals.codes)
    text = URL.sub(" ", " ".join(signals.text))
    if status in (None, 200) and signals.embedded_status is not None:
        status = signals.embedded_status
    if status == 429:
        return _budget_kind(codes, text, "rate_limit")
    if status == 402:
        return _budget_kind(codes, text, "billing")
    by_code = _first(CODE_RULES, codes) if codes else None
    if by_code is not None:
        return by_code
    by_text = _by_message(status, text) if text else None
    if status == 413 and by_text not in ("context_overflow", "rate_limit", "billing", "quota"):
        return "payload_too_large"
    if by_text is None and (status is None or status < 400) and SERVER_ERROR_CODE.search(codes):
        return "server_error"  # a 200 stream's error event; a real status says more
    return by_text or _by_status(status)


def _by_message(status: int | None, text: str) -> str | None:
    """The category the message text names, if any (rule 3 of the module docstring).

    A rate limit named in a 5xx is the provider's own trouble, and capacity words in a client
    error (Cloudflare's 403 "Service unavailable for account") do not override its status.
    """
    if OUTPUT_LIMIT.search(text):
        return "output_limit"
    by_text = _first(MESSAGE_RULES, text)
    if by_text == "rate_limit" and status is not None and status >= 500:
        return None
    if by_text == "overloaded" and status is not None and 400 <= status < 500:
        return None
    if by_text is None and not MESSAGE_RULES[4][1].search(text):  # no rate named
        by_text = _first(WIDER_FAMILIES, text)
    return by_text


def _body_of(error: Any) -> Any:
    body = getattr(error, "body", None)
    if body is not None:
        return body
    response = getattr(error, "response", None)
    if isinstance(response, Mapping):  # botocore's ClientError
        return response.get("Error", response)
    if response is not None:
        try:
            return response.json()
        except Exception:
            try:
                return response.text
            except Exception:
                return None
    return None


def _status_of(error: Any) -> int | None:
    for attr in ("status_code", "status", "http_status"):
        value = getattr(error, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    response = getattr(error, "response", None)
    if isinstance(response, Mapping):  # botocore's ClientError
        value = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        return value if isinstance(value, int) else None
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def _headers_of(error: Any) -> Mapping[str, str] | None:
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None) or getattr(error, "headers", None)
    return headers if isinstance(headers, Mapping) else None


def _model_call_failure() -> Any:
    """``ModelCallFailure``, imported once on first use (the types import the engine)."""
    global _FAILURE_TYPE
    if _FAILURE_TYPE is None:
        from fxtr.models._types import ModelCallFailure

        _FAILURE_TYPE = ModelCallFailure
    return _FAILURE_TYPE


_FAILURE_TYPE: Any = None


def _provider_category(error: Any) -> str | None:
    """The category of an error that carries provider information, else ``None``.

    Provider information is a model call's failure, fxtr's own infrastructure failure (a
    lost worker), or an HTTP status or body. Transport errors raised by user code (httpx's,
    the openai/anthropic SDKs' ``APITimeoutError``/``APIConnectionError``) carry none: they
    are the user's tool failing (a model call's own transport failures arrive as
    ``ModelCallError``).
    """
    failure_type = _model_call_failure()
    if isinstance(error, failure_type):
        return str(error.category)
    own = getattr(type(error), "failure_category", None)
    if isinstance(own, str):
        return own
    failure = getattr(error, "failure", None)
    if isinstance(failure, failure_type):
        return str(failure.category)
    status = _status_of(error)
    body = _body_of(error) if status is not None or hasattr(error, "body") else None
    if status is None and body is None:
        return None
    return category_from_http(status, body, _headers_of(error))


SDK_TRANSPORT_CATEGORY: dict[str, str] = {
    "APITimeoutError": "timeout",
    "APIConnectionError": "connection",
}
"""Category of the official SDKs' transport errors, by class name (``APITimeoutError`` is a
subclass of ``APIConnectionError``, so it comes first in its MRO)."""

SDK_MODULES = frozenset(("openai", "anthropic"))
"""Top-level packages whose ``SDK_TRANSPORT_CATEGORY`` classes count (matched by name, so
the SDKs are never imported here)."""


def _sdk_transport_category(error: Any) -> str | None:
    """``timeout`` or ``connection`` for an openai/anthropic transport error, else ``None``."""
    for cls in type(error).__mro__:
        category = SDK_TRANSPORT_CATEGORY.get(cls.__name__)
        if category is not None and cls.__module__.partition(".")[0] in SDK_MODULES:
            return category
    return None


CALL_FAILURE = "__fxtr_call_failure__"
"""The attribute a recorded model call's error carries: the call's ``(reason, category)``."""


def mark_call_failure(error: BaseException, reason: str, category: str | None) -> None:
    """Mark ``error`` as the error of a recorded model call, with the call's reason.

    A step (or a tracing step, or a LangGraph node) that fails with this very error takes
    the call's reason and category (DESIGN §3), not ``tool_error``: the SDK's transport
    failure inside a step is the model call's, and says ``unknown`` on both. An error that
    cannot take attributes keeps the classifier's answer.
    """
    try:
        setattr(error, CALL_FAILURE, (reason, category))
    except (AttributeError, TypeError):  # a class with __slots__: nothing to mark
        pass


def failure_category(error: Any) -> str | None:
    """The finer category of a failure (``rate_limit``, ``timeout``, ...).

    ``None`` for an error that carries no provider information: user code that raised.
    Transport errors keep their category (``timeout``, ``connection``): httpx's and httpx2's,
    and the official SDKs' ``APITimeoutError`` and ``APIConnectionError`` (openai, anthropic).
    """
    for cause in _chain(error):
        recorded = getattr(cause, CALL_FAILURE, None)
        if isinstance(recorded, tuple) and len(recorded) == 2:
            return recorded[1] if isinstance(recorded[1], str) else None
        category = _provider_category(cause)
        if category is not None:
            return category
    category = _sdk_transport_category(error)
    if category is not None:
        return category
    for name in _HTTP_LIBRARIES:  # an error of one of them means it is imported
        http = sys.modules.get(name)
        if http is None:
            continue
        if isinstance(error, http.TimeoutException):
            return "timeout"
        if isinstance(error, http.TransportError):
            return "connection"
    return None


_HTTP_LIBRARIES = ("httpx", "httpx2")
"""The HTTP clients whose transport errors keep their category (httpx2 is the transport of
openai 3.x and anthropic 1.x and later; both have httpx's exception tree)."""


def classify(error: Any) -> str:
    """The failure reason of an error: one of ``REASONS`` (``stall`` is decided by the graph).

    Args:
        error: any exception, an ``httpx.HTTPStatusError``, an SDK-style error with
            ``status_code`` and ``body``, a botocore ``ClientError``, or a
            ``ModelCallFailure``. An error that carries no provider information (user
            code that raised, httpx's and the SDKs' transport errors included) is
            ``tool_error``.
    """
    for cause in _chain(error):  # the error, then what it was raised from or while handling
        recorded = getattr(cause, CALL_FAILURE, None)  # a model call's error: its reason
        if isinstance(recorded, tuple) and recorded and recorded[0] in REASONS:
            return str(recorded[0])
        category = _provider_category(cause)
        if category is not None:
            return REASON_OF_CATEGORY.get(category, "unknown")
    return "tool_error"


def _chain(error: Any) -> Iterable[Any]:
    """The error, then those it was raised from or while handling, each once.

    ``__cause__``, else ``__context__`` unless ``raise ... from None`` hid it.

    So a step that raises ``RuntimeError(...) from failure`` (or inside ``except``) while a
    model call's error is handled takes that call's reason, not ``tool_error``.
    """
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        cause = getattr(error, "__cause__", None)
        if cause is None and not getattr(error, "__suppress_context__", False):
            cause = getattr(error, "__context__", None)
        error = cause


def call_reason(error: Any) -> str:
    """The reason of a model call that failed with ``error``.

    As ``classify``, except that an error carrying no provider information is ``unknown``:
    a model call that crashed (a mock's reply function that raised, a client's bug) is not a
    tool or step raising, so never ``tool_error``.
    """
    reason = classify(error)
    return "unknown" if reason == "tool_error" else reason


def step_failure(
    error: BaseException, calls: Sequence[Mapping[str, Any]]
) -> tuple[str, str | None]:
    """The reason and category of a step (or tool, or node) that failed with ``error``.

    The error's own (``classify``, through its chain); when it says nothing more than
    ``tool_error`` and the last model call recorded inside the step failed, that call's: the
    step failed because its model call did (the seed's ``qa.answer`` raises a plain
    ``RuntimeError`` when ``generate_with_retries`` returns a ``ModelCallFailure``).
    """
    reason, category = classify(error), failure_category(error)
    last = calls[-1] if calls else None
    if reason == "tool_error" and last and last.get("status") == "failed" and last.get("reason"):
        return str(last["reason"]), last.get("category") or category
    return reason, category
