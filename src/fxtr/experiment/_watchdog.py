"""The loop watchdog: names a step that blocks the event loop, while it blocks.

Steps are coroutines sharing one event loop; a step that calls ``time.sleep`` or does
blocking I/O stops every other step (and the claims' renewal) until it returns. The loop
bumps a heartbeat every ``INTERVAL`` seconds (one ``call_later`` callback); a daemon thread
checks it at the same pace and, when the loop has not beaten for ``THRESHOLD`` seconds, logs
one WARNING on the ``fxtr`` logger naming the step whose task is running on the loop (the
invocation ``invoke`` registered for that task in ``Run.running``) when that step began
before the loop went silent. Blocking in the engine's own work (no step's task is current),
or many short steps run back to back, is not blamed on a step; the workers of a step that
never suspends yield to the loop every ``YIELD_AFTER`` seconds (see ``_resolution``). The
cost is a callback every ``INTERVAL`` seconds on the loop and a thread that sleeps between
checks.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fxtr.experiment._records import Invocation

log = logging.getLogger("fxtr")

INTERVAL = 0.25
"""Seconds between two heartbeats of the loop (and two checks of the thread)."""
THRESHOLD = 1.0
"""Seconds without a heartbeat after which the running step is named."""


class LoopWatchdog:
    """Watches one event loop for a step that blocks it (``start`` on the loop, ``stop``)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        running: dict[asyncio.Task[object], Invocation],
        threshold: float = THRESHOLD,
        interval: float = INTERVAL,
    ) -> None:
        self.loop = loop
        self.running = running
        self.threshold = threshold
        self.interval = interval
        self.last_beat = time.monotonic()
        self._stop = threading.Event()
        self._handle: asyncio.TimerHandle | None = None
        self._thread = threading.Thread(target=self._watch, name="fxtr-loop-watchdog", daemon=True)

    def start(self) -> None:
        """Begin beating (call from the loop's thread) and watching."""
        self._beat()
        self._thread.start()

    def stop(self) -> None:
        """Stop watching; the thread ends within one interval."""
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()

    def _beat(self) -> None:
        self.last_beat = time.monotonic()
        self._handle = self.loop.call_later(self.interval, self._beat)

    def _watch(self) -> None:
        warned_at: float | None = None  # the heartbeat of the block already reported
        while not self._stop.wait(self.interval):
            beat = self.last_beat
            blocked = time.monotonic() - beat
            if blocked < self.threshold or warned_at == beat:
                continue
            inv = self._blocking_invocation()
            if inv is None or not self._spans_block(inv):
                continue
            warned_at = beat
            log.warning(
                "step %r at %r has blocked the event loop for %.1f s: every other step waits "
                "meanwhile. It calls something blocking (time.sleep, requests, file or "
                "subprocess I/O); await asyncio.sleep(...) or asyncio.to_thread(...) instead.",
                inv.step,
                inv.address,
                blocked,
            )

    def _spans_block(self, inv: Invocation) -> bool:
        """Whether the step was running when the loop went silent.

        It began by the beat after the last one seen, so it is not one of many short steps
        that ran back to back since.
        """
        started = inv.started_at  # wall time; the beat is on the monotonic clock
        if started is None:
            return False
        silent_since = time.time() - (time.monotonic() - self.last_beat)
        return started <= silent_since + self.interval

    def _blocking_invocation(self) -> Invocation | None:
        try:
            task = asyncio.current_task(self.loop)
        except RuntimeError:  # the loop is closing
            return None
        return None if task is None else self.running.get(task)
