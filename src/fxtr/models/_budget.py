"""What a model call will cost before it is made, and the run's budget (DESIGN §14).

``estimate_call`` forecasts one call from its request: input characters / 4, output the
sampling's ``max_tokens``, else the model's median output seen so far, else 256, at the
model's price (``None`` when the model has none: never 0). ``Budget`` refuses to start a
call that would take spent plus in-flight forecast past the limit; the model APIs ask it
through ``spending`` around every call they make.
"""

from __future__ import annotations

import contextlib
import contextvars
import statistics
from collections.abc import AsyncIterator
from typing import Any

from fxtr.models._prices import cost_of_tokens, has_price
from fxtr.models._types import (
    AssistantMessage,
    ModelCallError,
    ModelCallFailure,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    ToolMessage,
    UserMessage,
)

DEFAULT_OUTPUT_TOKENS = 256
"""Output tokens assumed for a call with no ``max_tokens`` and no history of its model."""


def request_chars(request: ModelRequest) -> int:
    """Characters of text a request sends (every message, tool results included)."""
    total = 0
    for m in request.context:
        if isinstance(m, (SystemMessage, UserMessage, AssistantMessage)):
            total += sum(len(b.text) for b in m.content)
        elif isinstance(m, ToolMessage):
            total += sum(len(r.content) for r in m.results)
    return total


def priced_name(api: Any) -> tuple[str | None, str | None, str | None]:
    """``(model name to price, provider, base URL)`` of a model API (a mock's ``price_as``)."""
    name = getattr(api, "model_name", None)
    provider = getattr(api, "provider", None)
    if provider == "mock":
        if name is not None and has_price(name):
            return name, None, None
        return getattr(api, "price_as", None), None, None
    return name, provider, getattr(api, "base_url", None)


def price_tokens(api: Any, input_tokens: int, output_tokens: int) -> float | None:
    """Dollars for these tokens at ``api``'s model price, or ``None`` when it has none."""
    name, provider, base_url = priced_name(api)
    if not name:
        return None
    return cost_of_tokens(
        name, input_tokens, output_tokens, provider=provider, api_url=base_url, warn=False
    )


def estimate_call(
    api: Any, request: ModelRequest, median_output: float | None = None, extra_chars: int = 0
) -> tuple[int, int, float | None]:
    """``(input tokens, output tokens, dollars or None)`` forecast for one call.

    Args:
        api: the model API the call goes to (it names the model and its price).
        request: what is sent.
        median_output: the model's median output tokens in the store or this run, used when
            the request sets no ``max_tokens``.
        extra_chars: characters the request will hold beyond its text (a dry run's forecast
            of an answer that the prompt quotes: counted, never built).
    """
    input_tokens = max(1, (request_chars(request) + extra_chars + 3) // 4)
    sampling = request.sampling
    if sampling is not None and sampling.max_tokens:
        output_tokens = int(sampling.max_tokens)
    elif median_output is not None:
        output_tokens = max(1, round(median_output))
    else:
        output_tokens = DEFAULT_OUTPUT_TOKENS
    return input_tokens, output_tokens, price_tokens(api, input_tokens, output_tokens)


class Budget:
    """A limit on the dollars a run's model calls spend (``--fxtr-max-cost``).

    A call starts only when what was spent, plus the forecast of the calls in flight, plus
    its own forecast stays within ``limit``; otherwise it fails at once with category
    ``budget_exhausted`` (reason ``budget``) and nothing is sent. Calls of a model with no
    price cost nothing here (they cannot be counted) and are counted in ``unpriced``.
    """

    def __init__(self, limit: float) -> None:
        if not limit >= 0:
            msg = f"A budget must be 0 dollars or more, got {limit!r}."
            raise ValueError(msg)
        self.limit = float(limit)
        self.spent = 0.0
        self.in_flight = 0.0
        self.refused = 0
        """Calls that did not start because of the budget."""
        self.unpriced = 0
        self._outputs: dict[str, list[int]] = {}

    @property
    def reached(self) -> bool:
        """Whether a call was refused for the budget."""
        return self.refused > 0

    def median_output(self, model: str) -> float | None:
        seen = self._outputs.get(model)
        return statistics.median(seen) if seen else None

    def admit(self, api: Any, request: ModelRequest) -> float:
        """Reserve the forecast of a call; its dollars in flight.

        Raises:
            ModelCallError: the call would take the run past its budget (``budget_exhausted``).
        """
        name = str(getattr(api, "model_name", "?"))
        _, _, forecast = estimate_call(api, request, self.median_output(name))
        if forecast is None:
            self.unpriced += 1
            return 0.0
        if self.spent + self.in_flight + forecast > self.limit:
            self.refused += 1
            raise ModelCallError(
                ModelCallFailure(
                    category="budget_exhausted",
                    description=(
                        f"not started: this call to {name} (about ${forecast:.6f}) would take "
                        f"the run past its budget (${self.spent:.6f} spent, "
                        f"${self.in_flight:.6f} in flight, budget ${self.limit:g}). Raise "
                        "--fxtr-max-cost and run again with --fxtr-resume: nothing done is lost."
                    ),
                )
            )
        self.in_flight += forecast
        return forecast

    def settle(self, api: Any, reserved: float, response: ModelResponse | None) -> None:
        """A call ended: its reservation is released and what it cost is spent."""
        self.in_flight = max(0.0, self.in_flight - reserved)
        if response is None:
            return
        if response.cost is not None:
            self.spent += response.cost
        name = str(getattr(api, "model_name", "?"))
        self._outputs.setdefault(name, []).append(response.usage.output_tokens)


current_budget: contextvars.ContextVar[Budget | None] = contextvars.ContextVar(
    "fxtr_budget", default=None
)
"""The budget of the run the current task belongs to (``None``: no limit)."""


@contextlib.asynccontextmanager
async def spending(api: Any, request: ModelRequest) -> AsyncIterator[list[ModelResponse]]:
    """Around one model call: admitted by the current budget, then settled with its cost.

    The API appends its response to the yielded list when the call succeeds.
    """
    budget = current_budget.get()
    box: list[ModelResponse] = []
    if budget is None:
        yield box
        return
    reserved = budget.admit(api, request)
    try:
        yield box
    finally:
        budget.settle(api, reserved, box[0] if box else None)
