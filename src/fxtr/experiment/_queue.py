"""Operations start when the workflow body that scheduled them suspends or returns.

``run_step`` and ``run_child_workflow`` return a handle at once; the work behind it is queued
and started at the event loop's next turn, that is when the body (or a task of it, such as a
branch of ``asyncio.gather``) first awaits something that suspends it, or when it returns. A
``SignatureError`` or ``DeterminismError`` raised at scheduling time, before that point, drops
the queued work unstarted, instead of cancelling it after it began (and was paid for).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fxtr.experiment.errors import UpstreamFailedError

Work = Coroutine[Any, Any, Any]


class _Queue:
    """The work a body scheduled since the loop last turned."""

    __slots__ = ("handle", "spawn", "work")

    def __init__(self, spawn: Callable[[Work], Any]) -> None:
        self.spawn = spawn
        self.work: list[Work] = []
        self.handle: asyncio.Handle | None = None

    def add(self, work: Work) -> None:
        self.work.append(work)
        if self.handle is None:
            self.handle = asyncio.get_running_loop().call_soon(self.start)

    def start(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        work, self.work = self.work, []
        for w in work:
            self.spawn(w)

    def drop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        for w in self.work:  # scheduled, never started: nothing of it ran
            w.close()
        self.work = []


_queued: contextvars.ContextVar[_Queue | None] = contextvars.ContextVar(
    "fxtr_queued_operations", default=None
)
"""The queue of the body running in this context (``None`` in the engine's own tasks)."""


def queue_while_body_runs(work: Work) -> bool:
    """Queue work scheduled by a running body; False outside a body (start it now)."""
    queue = _queued.get()
    if queue is None:
        return False
    queue.add(work)
    return True


def not_in_a_body() -> None:
    """Mark the current context as engine work (run in a copied context: a new task's)."""
    _queued.set(None)


async def run_body_queued(body: Awaitable[Any], spawn: Callable[[Work], Any]) -> Any:
    """Await a workflow body whose scheduled work starts when it suspends or returns."""
    queue = _Queue(spawn)
    token = _queued.set(queue)
    try:
        result = await body
    except UpstreamFailedError:  # the body ends skipped: what it scheduled goes on
        queue.start()
        raise
    except BaseException:  # an error at scheduling time leaves the job: nothing starts
        queue.drop()
        raise
    finally:
        _queued.reset(token)
    queue.start()
    return result
