"""What a model call will cost before it is made, and the run's budget (DESIGN §14).

``estimate_call`` forecasts one call from its request: input characters / 4, output the
sampling's ``max_tokens``, else the model's median output seen so far, else 256, at the
model's price (``None`` when the model has none: never 0). ``Budget`` refuses to start a
call that would take spent plus in-flight forecast past the limit; the model APIs ask it
through ``spending`` around every call they make.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import statistics
from collections.abc import AsyncIterator, Callable
from typing import Any

from fxtr.models._prices import cost_of_tokens, has_price
from fxtr.models._slots import give_back
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


@dataclasses.dataclass
class Graders:
    """The calls that will grade an answer (its case's judge calls), for the budget."""

    per_call: Callable[[Budget, int | None], float]
    """The forecast dollars of one of them, given what the run has seen so far and the
    answer's output tokens (``None`` while it is not known)."""
    calls: int = 1
    answer_tokens: int | None = None
    """The graded answer's output tokens, once its call settled."""

    def cost(self, budget: Budget) -> float:
        """The forecast dollars of one of them now."""
        return self.per_call(budget, self.answer_tokens)


then_calls: contextvars.ContextVar[Graders | None] = contextvars.ContextVar(
    "fxtr_budget_then", default=None
)
"""Around a call whose answer other calls will grade (an eval's subject call): those calls."""

paid_for: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "fxtr_budget_paid_for", default=False
)
"""Around a call that grades an answer already paid for (a judge's): it draws on what the
answer's call reserved for it."""


@dataclasses.dataclass
class Reservation:
    """What an admitted call holds of the budget until it settles."""

    forecast: float = 0.0
    """Its own forecast, in flight."""
    owed: list[Any] | None = None
    """The entry of the budget's ``owed`` it added (``[graders, calls left]``)."""
    counted: bool = False
    """Whether it counts among the budget's calls in flight."""


class Budget:
    """A limit on the dollars a run's model calls spend (``--fxtr-max-cost``).

    A call starts only when what was spent, plus the forecast of the calls in flight, plus
    what is owed to the judges of answers asked, plus its own forecast (and, for a call whose
    answer will be graded, the forecast of its grading calls) stays within ``limit``. A
    judge's call of an answer paid for needs only spent, in flight and its own forecast to
    fit: what is owed was kept for it, so an answer paid for is graded. A call that does not
    fit waits while calls are in flight (they may cost less than forecast, and teach the
    forecast what this run's answers are like); then it fails at once with category
    ``budget_exhausted`` (reason ``budget``) and nothing is sent. Calls of a model with no
    price cost nothing here (they cannot be counted) and are counted in ``unpriced``.
    ``known_outputs`` are the models' median output tokens in the store's history, the
    forecast's output until this run has seen the model answer.
    """

    def __init__(self, limit: float, known_outputs: dict[str, float] | None = None) -> None:
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
        self._known_outputs = dict(known_outputs or {})
        """Per model, its median output tokens in the store's history (before this run)."""
        self._owed: list[list[Any]] = []
        """Per answer asked and not yet graded: ``[graders, grading calls left]``."""
        self._settled: asyncio.Event | None = None
        self._calls_in_flight = 0

    @property
    def reached(self) -> bool:
        """Whether a call was refused for the budget."""
        return self.refused > 0

    @property
    def owed(self) -> float:
        """Dollars kept for the grading calls of the answers asked (at today's forecast)."""
        return float(sum(g.cost(self) * left for g, left in self._owed))

    def median_output(self, model: str) -> float | None:
        """The model's median output tokens in this run, else in the store's history."""
        seen = self._outputs.get(model)
        return statistics.median(seen) if seen else self._known_outputs.get(model)

    def _plan(self, api: Any, request: ModelRequest) -> tuple[str, float | None, Graders | None]:
        name = str(getattr(api, "model_name", "?"))
        _, _, forecast = estimate_call(api, request, self.median_output(name))
        return name, forecast, None if paid_for.get() else then_calls.get()

    def _fits(self, forecast: float, graders: Graders | None) -> tuple[bool, float, float]:
        """Whether a call fits; what it would commit beyond the run's, and the owed now."""
        owed = self.owed
        if paid_for.get() and self._owed:
            # a judge of an answer paid for: what is owed was kept for it and its like, so
            # it needs only what the rule of every call asks (spent and in flight, plus its own)
            return self.spent + self.in_flight + forecast <= self.limit, 0.0, owed
        then = graders.cost(self) * graders.calls if graders is not None else 0.0
        committed = self.spent + self.in_flight + owed + forecast
        fits = committed + then <= self.limit
        if not fits and not self._outputs and not self._calls_in_flight:
            # the run's first answer: its judges' forecast knows nothing of this run yet
            # (256 output tokens a call), so it starts if it fits alone, to learn
            fits = committed <= self.limit
        return fits, then, owed

    def admit(self, api: Any, request: ModelRequest) -> Reservation:
        """Reserve the forecast of a call (and of the calls that will grade its answer).

        Raises:
            ModelCallError: the call would take the run past its budget (``budget_exhausted``).
        """
        name, forecast, graders = self._plan(api, request)
        if forecast is None:
            self.unpriced += 1
            return Reservation()
        fits, then, owed = self._fits(forecast, graders)
        if not fits:
            self.refused += 1
            kept = f" and ${then:.6f} for the judge calls of its answer" if then else ""
            raise ModelCallError(
                ModelCallFailure(
                    category="budget_exhausted",
                    description=(
                        f"not started: this call to {name} (about ${forecast:.6f}{kept}) "
                        f"would take the run past its budget (${self.spent:.6f} spent, "
                        f"${self.in_flight:.6f} in flight, ${owed:.6f} kept for the judges "
                        f"of answers asked, budget ${self.limit:g}). Raise --fxtr-max-cost "
                        "and run again with --fxtr-resume: nothing done is lost."
                    ),
                )
            )
        if paid_for.get() and self._owed:
            self._owed[0][1] -= 1
            if self._owed[0][1] <= 0:
                self._owed.pop(0)
        entry = None
        if graders is not None:
            entry = [graders, graders.calls]
            self._owed.append(entry)
        self.in_flight += forecast
        self._calls_in_flight += 1
        return Reservation(forecast, entry, counted=True)

    async def wait_to_admit(self, api: Any, request: ModelRequest) -> Reservation:
        """``admit``, after waiting while the call does not fit and calls are in flight.

        Calls in flight settle, perhaps below their forecast, and teach the forecast this
        run's answers. A call waits holding no concurrency slot of the run (``waiting_slot``
        is given back meanwhile), and makes its reservation before it takes the slot again:
        the calls woken by one settlement must not all fit the same dollars.
        """
        slot = waiting_slot.get()
        released = False
        try:
            while self._calls_in_flight:
                _, forecast, graders = self._plan(api, request)
                if forecast is None or self._fits(forecast, graders)[0]:
                    break
                if slot is not None and not released:
                    released = True
                    give_back(slot)
                if self._settled is None:
                    self._settled = asyncio.Event()
                await self._settled.wait()
            return self.admit(api, request)
        finally:
            if released:
                # taken again even when cancelled, so that the caller's own release balances it
                await asyncio.shield(slot.acquire())  # type: ignore[union-attr]

    def settle(self, api: Any, reserved: Reservation, response: ModelResponse | None) -> None:
        """A call ended: its reservation is released and what it cost is spent.

        A call that failed owes its graders nothing: they will not run.
        """
        self.in_flight = max(0.0, self.in_flight - reserved.forecast)
        if reserved.counted:
            self._calls_in_flight -= 1
        if not self._calls_in_flight:
            self.in_flight = 0.0  # no residue of float sums
        if self._settled is not None:
            self._settled.set()
            self._settled = None
        if response is None:
            if reserved.owed is not None and reserved.owed in self._owed:
                self._owed.remove(reserved.owed)
            return
        if reserved.owed is not None:  # its graders will quote this answer: its size is known
            reserved.owed[0].answer_tokens = response.usage.output_tokens
        if response.cost is not None:
            self.spent += response.cost
        name = str(getattr(api, "model_name", "?"))
        self._outputs.setdefault(name, []).append(response.usage.output_tokens)


waiting_slot: contextvars.ContextVar[asyncio.Semaphore | None] = contextvars.ContextVar(
    "fxtr_budget_waiting_slot", default=None
)
"""The run's concurrency slot the current call's step holds (set by the kit around its
calls): given back while the call waits for the budget."""


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
    reserved = await budget.wait_to_admit(api, request)
    try:
        yield box
    finally:
        budget.settle(api, reserved, box[0] if box else None)
