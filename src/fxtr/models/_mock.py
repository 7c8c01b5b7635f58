"""``MockModelAPI``: the offline model for evals and tests, with scripted replies and failures."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from fxtr.models._budget import spending
from fxtr.models._observe import observe
from fxtr.models._prices import cost_of, has_price
from fxtr.models._types import (
    AssistantMessage,
    ContentText,
    ModelCallError,
    ModelCallFailure,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)

Reply = str | Sequence[str] | Callable[[ModelRequest], "str | ModelResponse | ModelCallFailure"]


def estimate_tokens(text: str) -> int:
    """About four characters a token, as for English with the common tokenizers."""
    return max(1, (len(text) + 3) // 4)


def request_text(request: ModelRequest) -> str:
    """All the text a request sends."""
    parts: list[str] = []
    for m in request.context:
        if isinstance(m, (SystemMessage, UserMessage, AssistantMessage)):
            parts.extend(b.text for b in m.content)
        elif isinstance(m, ToolMessage):
            parts.extend(r.content for r in m.results)
    return "\n".join(parts)


class MockModelAPI:
    """A model that answers from a script, offline, with realistic usage and cost.

    Args:
        model_name: the name calls are recorded under. A name in the price table (say
            ``"gpt-4o-mini"``) is priced like that model, so offline cost reports mean
            something; otherwise ``price_as`` names the model to price it as, or cost is
            ``None``.
        reply: a string; a list of strings used in turn (the last one repeats); or a
            callable of the ``ModelRequest`` returning a string, a ``ModelResponse`` or a
            ``ModelCallFailure`` (raised as ``ModelCallError``), or raising.
        delay: seconds each call takes.
        price_as: a priced model name to compute the cost with.
    """

    provider = "mock"

    def __init__(
        self,
        model_name: str,
        reply: Reply,
        *,
        delay: float = 0.0,
        price_as: str | None = None,
    ) -> None:
        self.model_name = model_name
        self.delay = delay
        self.price_as = price_as
        self.requests: list[ModelRequest] = []
        """Every request received, in order (for tests and for inspection)."""
        if isinstance(reply, str):
            self._next: Callable[[ModelRequest], Any] = lambda request: reply
        elif callable(reply):
            self._next = reply
        else:
            replies = list(reply)
            if not replies:
                msg = "MockModelAPI needs at least one reply."
                raise ValueError(msg)
            counter = itertools.count()
            self._next = lambda request: replies[min(next(counter), len(replies) - 1)]

    def __repr__(self) -> str:
        return f"MockModelAPI({self.model_name!r})"

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Answer from the script.

        Raises:
            ModelCallError: the script returned a ``ModelCallFailure``.
        """
        from fxtr.models._api import call_limiter

        limiter = call_limiter.get()
        async with observe(self.model_name, request, self.provider) as call:
            async with spending(self, request) as spent:
                response = await self._answer(request, call, limiter)
                spent.append(response)
            return response

    async def _answer(self, request: ModelRequest, call: Any, limiter: Any) -> ModelResponse:
        self.requests.append(request)
        if limiter is not None:
            async with limiter(self.provider):
                if self.delay:
                    await asyncio.sleep(self.delay)
                out = self._next(request)
        else:
            if self.delay:
                await asyncio.sleep(self.delay)
            out = self._next(request)
        if isinstance(out, ModelCallFailure):
            raise ModelCallError(out)
        if isinstance(out, ModelResponse):
            call.response = out
            return out
        text = str(out)
        usage = Usage(
            input_tokens=estimate_tokens(request_text(request)),
            output_tokens=estimate_tokens(text),
        )
        priced = self.model_name if has_price(self.model_name) else self.price_as
        response = ModelResponse(
            output=(ContentText(text=text),),
            usage=usage,
            cost=cost_of(priced, usage) if priced else None,
            stop_reason="stop",
            model=self.model_name,
        )
        call.response = response
        return response

    async def aclose(self) -> None:
        """Nothing to close; here so code written for real APIs runs unchanged."""
