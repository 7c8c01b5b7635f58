"""Claims liveness: the heartbeat that renews a run's claims from a thread of its own."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from fxtr.store._base import is_outage

if TYPE_CHECKING:
    from fxtr.experiment._engine import Run

log = logging.getLogger("fxtr")

LEASE = 6.0
"""Seconds a claim holds without a heartbeat. The holder renews its claims every third of
it from a thread of its own (a step that blocks the event loop does not stop it), so a
holder that can no longer beat (killed, a zombie, frozen, on another host) loses its claims
within seconds, not after a long lease."""


class Heartbeat(threading.Thread):
    """Renews a run's claims every third of its lease, from its own thread.

    Liveness is what a dead holder cannot do: a killed process (a zombie its parent has not
    reaped counts as running), a frozen one or one on another host stops beating, and its
    claims expire one lease later. A renewal that fails (a store outage) is logged; the
    next one tries again.
    """

    def __init__(self, run: Run) -> None:
        super().__init__(name="fxtr-claims-heartbeat", daemon=True)
        self.job_run = run
        self._halt = threading.Event()

    def run(self) -> None:
        run = self.job_run
        while not self._halt.wait(run.lease / 3):
            try:
                held = tuple(run.held)
            except RuntimeError:  # changed size while copied: take it at the next beat
                continue
            if not held:
                continue
            try:
                run.store.renew(list(held), run.lease)
            except Exception as exc:  # the next beat tries again
                if is_outage(exc):
                    return  # the run stops at its next write, and says so there
                log.warning("fxtr could not renew its claims: %s: %s", type(exc).__name__, exc)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)
