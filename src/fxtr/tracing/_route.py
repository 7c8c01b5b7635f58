"""``model="auto"``: the tracing client's default route, and the failures that move a call on.

The default route takes the configured models in order and keeps those whose context window
fits the request (its characters / 4, plus the output it asks for) and, when the call gives a
``max_cost``, whose forecast price is within it. A call that fails with ``context_overflow``
or because the model id is retired or unknown (404, ``model_not_found``, decommissioned) is
sent to the next of them, as a node that ``depends_on`` the failed one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

DEFAULT_OUTPUT_TOKENS = 256
"""Output tokens forecast for a request that sets no ``max_tokens``."""

_RETIRED = re.compile(
    r"model_not_found|model[_ ]decommissioned|decommissioned|deprecated|retired|"
    r"does not exist|unknown model|no such model|model .{0,80}not found",
    re.IGNORECASE,
)


def request_tokens(request: Any) -> tuple[int, int]:
    """``(input, output)`` tokens a request may take: characters / 4, and its max_tokens."""
    from fxtr.models._mock import estimate_tokens, request_text

    sampling = getattr(request, "sampling", None)
    out = getattr(sampling, "max_tokens", None) or DEFAULT_OUTPUT_TOKENS
    return estimate_tokens(request_text(request)), out


def forecast_cost(api: Any, request: Any) -> float | None:
    """The price of sending ``request`` to ``api``'s model at most, or ``None`` (unpriced)."""
    from fxtr.models import Usage, cost_of

    tokens_in, tokens_out = request_tokens(request)
    usage = Usage(input_tokens=tokens_in, output_tokens=tokens_out)
    provider = getattr(api, "provider", None)
    return cost_of(
        getattr(api, "price_as", None) or api.model_name,
        usage,
        provider=None if provider in (None, "mock") else provider,
        api_url=getattr(api, "base_url", None),
        warn=False,
    )


def candidates(
    models: Mapping[str, Any],
    windows: Mapping[str, int],
    request: Any,
    max_cost: float | None = None,
    skip: frozenset[str] = frozenset(),
) -> tuple[list[str], list[str]]:
    """The models that fit, in order; and why each other one does not."""
    tokens_in, tokens_out = request_tokens(request)
    fit: list[str] = []
    why: list[str] = []
    for name, api in models.items():
        if name in skip:
            why.append(f"{name}: its call failed")
            continue
        window = windows.get(name, getattr(api, "context_window", None))
        if window is not None and tokens_in + tokens_out > window:
            why.append(f"{name}: ~{tokens_in + tokens_out:,} tokens over its window of {window:,}")
            continue
        if max_cost is not None:
            cost = forecast_cost(api, request)
            if cost is None:
                why.append(f"{name}: no price to hold to max_cost")
                continue
            if cost > max_cost:
                why.append(f"{name}: ~${cost:.6f} over max_cost ${max_cost:g}")
                continue
        fit.append(name)
    return fit, why


def reroutable(error: BaseException) -> bool:
    """Whether a failed call goes on to the next model: context overflow, retired model."""
    failure = getattr(error, "failure", None)
    if failure is None:
        return False
    category = getattr(failure, "category", "")
    if category in ("context_overflow", "model_not_found"):
        return True
    status = getattr(failure, "status_code", None)
    text = str(getattr(failure, "description", ""))
    if category == "not_found" or status in (404, 410):
        return True
    return status in (400, None) and bool(_RETIRED.search(text))
