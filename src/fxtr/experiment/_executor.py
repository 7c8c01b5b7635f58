"""Executors: where step bodies run. The coordinator keeps replay, the cache and the record."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fxtr.experiment._definition import _normalized_source_hash
from fxtr.experiment._encoding import decode_text

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
