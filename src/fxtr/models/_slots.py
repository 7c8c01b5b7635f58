"""A concurrency slot of the run given back while a model call waits (a batch, the budget).

The engine holds one of the run's ``--fxtr-concurrency`` slots around each step body. A call
that waits on something other than the model (its provider batch, room in the budget) gives
it back meanwhile, so the waiting calls do not bound how many others run, and takes it again
before it goes on.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable

parking: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "fxtr_batch_parking", default=None
)
"""Set by the engine around a map's workers: called when an invocation parks (on a batch, on
the budget), so that another worker takes the next invocation meanwhile."""


def give_back(slot: asyncio.Semaphore) -> None:
    """Release a slot the caller holds while it waits; another worker of the map starts."""
    slot.release()
    more = parking.get()
    if more is not None:
        more()
