"""Executors: where step bodies run. The coordinator keeps replay, the cache and the record."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fxtr.experiment._definition import _normalized_source_hash
from fxtr.experiment._encoding import decode_text, encode_text, fingerprint_text

if TYPE_CHECKING:
    from fxtr.experiment._context import StepContext
    from fxtr.experiment._definition import StepDefinition
    from fxtr.experiment._records import Invocation


@runtime_checkable
class Executor(Protocol):
    """Runs one step invocation and returns its result (or raises its exception).

    The engine calls ``run`` once per invocation that must execute, after the cache and the
    record were consulted and the address was claimed; what ``run`` returns is validated,
    encoded and recorded by the engine. An executor must not retry on its own: a failure is
    the invocation's, and ``resume`` decides what runs again.
    """

    async def run(
        self, step: StepDefinition[..., Any], context: StepContext, kwargs: dict[str, Any]
    ) -> Any:
        """Run ``step.fn(context, **kwargs)`` somewhere; honour ``step.timeout``."""
        ...

    async def aclose(self) -> None:
        """Release what the executor holds (clients, clusters)."""
        ...


class LocalExecutor:
    """Steps run on the coordinator's event loop (the default)."""

    async def run(
        self, step: StepDefinition[..., Any], context: StepContext, kwargs: dict[str, Any]
    ) -> Any:
        """Await the step body here, within its timeout."""
        if step.timeout is None:
            return await context._enter(step.fn(context, **kwargs))
        async with asyncio.timeout(step.timeout):
            return await context._enter(step.fn(context, **kwargs))

    async def aclose(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return "LocalExecutor()"


LOCAL = LocalExecutor()


# the seam for executors that run steps elsewhere (fxtr.integrations.dask) ---------------


def source_hash(fn: Callable[..., Any]) -> str:
    """The normalized source hash of a step's function, as its fingerprint uses it.

    A worker compares it with the coordinator's to be sure it runs the same code.
    """
    return _normalized_source_hash(fn)


def invocation_of(context: StepContext) -> Invocation:
    """The record an invocation fills while it runs: logs, model calls, tokens, cost.

    An executor adds what happened on the worker to it before returning the result.
    """
    return context._invocation


def keep_entities(context: StepContext, texts: Mapping[str, str]) -> None:
    """Entities a step stored on a worker (canonical texts by id): kept with the result."""
    run = context._run
    batch = run.queue()
    for entity_id, text in texts.items():
        run.entities.setdefault(entity_id, decode_text(text))
        batch.entities[entity_id] = text


def encode_value(value: Any) -> str:
    """A value (step inputs, a result, an entity) in fxtr's canonical typed JSON text."""
    return encode_text(value)


def decode_value(text: str) -> Any:
    """The value ``encode_value`` wrote (entity classes must be importable here)."""
    return decode_text(text)


def fingerprint_of_text(text: str) -> str:
    """The fingerprint of a canonical text (an entity's id is that of its text)."""
    return fingerprint_text(text)


@contextlib.contextmanager
def limiting_model_calls(limiter: Callable[[str], Any] | None) -> Iterator[None]:
    """Within the block, each ``fxtr.models`` call runs inside ``limiter(provider)``.

    ``limiter(provider)`` is an async context manager: a cluster-wide semaphore per provider,
    say.
    """
    from fxtr.models._api import call_limiter

    token = call_limiter.set(limiter)
    try:
        yield
    finally:
        call_limiter.reset(token)


def failure_details(error: BaseException) -> dict[str, Any]:
    """What classifying a step's failure reads of it, as plain data a worker can send back.

    ``status_code`` and ``body`` (the provider's, when the error carries one) and the
    ``category`` fxtr gives it; an exception rebuilt from them classifies the same way.
    """
    from fxtr.models._classify import _body_of, _status_of, failure_category

    status = _status_of(error)
    body = _body_of(error) if status is not None or hasattr(error, "body") else None
    return {
        "status_code": status,
        "body": body if isinstance(body, str | dict | list) else None,
        "category": failure_category(error),
    }
