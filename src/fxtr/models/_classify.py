"""The failure classifier: from any exception to a provider category and a reason.

Two steps, both rules a reader can audit:

1. ``failure_category(error)``: the finer provider category (``rate_limit``, ``quota``,
   ``billing``, ``overloaded``, ...), read from a ``ModelCallFailure``, an HTTP status and the
   JSON body's ``code``/``type``/``message`` (``httpx.HTTPStatusError``, or any SDK-style
   error with ``status_code`` and ``body``), or httpx's transport errors. ``None`` for an
   error that carries none of these: user code that raised.
2. ``classify(error)``: the reason, from the category by ``REASON_OF_CATEGORY``. An error
   that carries no provider information (user code that raised, httpx transport errors
   included) is ``tool_error``; its category (``timeout``, ``connection``) is still kept.
"""

from __future__ import annotations

import json
import re
from typing import Any

REASONS = ("context_overflow", "budget", "tool_error", "stall", "refusal", "unknown")

REASON_OF_CATEGORY: dict[str, str] = {
    "rate_limit": "budget",
    "quota": "budget",
    "billing": "budget",
    "context_overflow": "context_overflow",
    "refusal": "refusal",
    "content_filter": "refusal",
}
"""Categories that map to a reason other than ``unknown`` (every other category)."""

# Signals read from the body's code, type and message (lower-cased), checked in this order;
# the first that matches decides. Status codes come after, in STATUS_CATEGORY.
SIGNAL_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # asking for more output than the model can give is not a context overflow
    (
        "output_limit",
        re.compile(
            r"max_(completion_|output_)?tokens.{0,60}(too large|exceeds|greater than|>|"
            r"maximum allowed|not valid|above maximum)|"
            r"maximum (allowed )?number of (output|completion) tokens|"
            r"supports at most \d+ (output|completion) tokens"
        ),
    ),
    (
        "context_overflow",
        re.compile(
            r"context_length_exceeded|context length|context window|prompt is too long|"
            r"input is too long|too many (input )?tokens|"
            r"reduce the length of the (messages|prompt)|"
            r"exceeds? the (model'?s? )?(maximum )?(context|token limit)|"
            r"request_too_large_for_model|"
            r"maximum context"
        ),
    ),
    (
        "content_filter",
        re.compile(
            r"content_filter|content_policy_violation|content management policy|"
            r"responsibleaipolicyviolation|moderation|flagged|safety system|"
            r"violat\w* (our|the) (usage|content) polic"
        ),
    ),
    (
        "quota",
        re.compile(
            r"insufficient_quota|exceeded your current quota|quota exceeded|quota_exceeded|"
            r"servicequotaexceeded|resource_exhausted|resource has been exhausted|out of quota"
        ),
    ),
    (
        "billing",
        re.compile(
            r"credit balance|billing|payment required|insufficient[_ ]funds|"
            r"budget has been exceeded|budget_exceeded|exceeded ?budget|over budget|spend limit|"
            r"purchase (more )?credits|plans? (and|&) billing"
        ),
    ),
    (
        "rate_limit",
        re.compile(r"rate_limit_exceeded|rate_limit_error|throttlingexception|too_many_requests"),
    ),
    ("overloaded", re.compile(r"overloaded_error|overloaded|server is busy|capacity")),
)

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
    529: "overloaded",
}
"""Category by HTTP status when the body's signals decide nothing."""

# Signals that may override a status only where the status itself says little.
_OVERRIDABLE = {"invalid_request", "permission", "not_found", "server_error", "conflict"}


def _body_of(error: Any) -> Any:
    body = getattr(error, "body", None)
    if body is not None:
        return body
    response = getattr(error, "response", None)
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
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def _signals(body: Any) -> str:
    """The code, type and message fields of a provider body, lower-cased, in one string."""
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return str(body).lower()
    parts: list[str] = []

    def walk(node: Any, depth: int) -> None:
        if depth > 4:
            return
        if isinstance(node, dict):
            for key, value in node.items():
                if key in (
                    "code",
                    "type",
                    "message",
                    "__type",
                    "status",
                    "reason",
                    "detail",
                    "error",
                    "finish_reason",
                    "stop_reason",
                    "param",
                ) and isinstance(value, (str, int)):
                    parts.append(str(value))
                elif isinstance(value, (dict, list)):
                    walk(value, depth + 1)
        elif isinstance(node, list):
            for item in node[:5]:
                walk(item, depth + 1)

    walk(body, 0)
    return " ".join(parts).lower()


def category_from_http(status: int | None, body: Any) -> str:
    """The provider category of an HTTP failure, from its status and body."""
    signals = _signals(body) if body is not None else ""
    by_signal = next((cat for cat, rule in SIGNAL_RULES if rule.search(signals)), None)
    by_status = STATUS_CATEGORY.get(status) if status is not None else None
    if by_status is None and status is not None:
        by_status = "server_error" if status >= 500 else "invalid_request"
    if status == 413:
        # a body over the provider's byte limit; only a token-window message makes it overflow
        return "context_overflow" if by_signal == "context_overflow" else "payload_too_large"
    if by_signal is None:
        return by_status or "unknown"
    if by_signal in ("billing", "quota", "context_overflow", "content_filter", "output_limit"):
        return by_signal
    if by_signal == "rate_limit":
        return (
            "rate_limit"
            if status in (None, 429) or by_status in _OVERRIDABLE
            else by_status or "rate_limit"
        )
    if by_signal == "overloaded":
        return (
            "overloaded"
            if status is None or status >= 500 or status == 429
            else by_status or "overloaded"
        )
    return by_status or by_signal


def failure_category(error: Any) -> str | None:
    """The finer category of a failure (``rate_limit``, ``timeout``, ...).

    ``None`` for an error that carries no provider information: user code that raised.
    """
    from fxtr.models._types import ModelCallFailure

    if isinstance(error, ModelCallFailure):
        return error.category
    own = getattr(type(error), "failure_category", None)
    if isinstance(own, str):  # fxtr's own infrastructure failures (a lost worker)
        return own
    failure = getattr(error, "failure", None)
    if isinstance(failure, ModelCallFailure):
        return failure.category
    status = _status_of(error)
    body = _body_of(error) if status is not None or hasattr(error, "body") else None
    if status is not None or body is not None:
        return category_from_http(status, body)
    try:
        import httpx
    except ImportError:  # pragma: no cover
        return None
    if isinstance(error, httpx.TimeoutException):
        return "timeout"
    if isinstance(error, httpx.TransportError):
        return "connection"
    return None


def _from_provider(error: Any) -> bool:
    """Whether an error carries provider information.

    That is a model call's failure, or an HTTP status or body. httpx transport errors
    raised by user code do not: they are the user's tool failing (a model call's own
    transport failures arrive as ``ModelCallError``).
    """
    from fxtr.models._types import ModelCallFailure

    if isinstance(error, ModelCallFailure) or isinstance(
        getattr(error, "failure", None), ModelCallFailure
    ):
        return True
    if isinstance(getattr(type(error), "failure_category", None), str):
        return True
    return _status_of(error) is not None or getattr(error, "body", None) is not None


def classify(error: Any) -> str:
    """The failure reason of an error: one of ``REASONS`` (``stall`` is decided by the graph).

    Args:
        error: any exception, an ``httpx.HTTPStatusError``, an SDK-style error with
            ``status_code`` and ``body``, or a ``ModelCallFailure``.
    """
    if not _from_provider(error):
        return "tool_error"
    category = failure_category(error)
    if category is None:
        return "tool_error"
    return REASON_OF_CATEGORY.get(category, "unknown")
