"""Adaptive concurrency: one limiter per provider base URL and model (DESIGN §14).

A limiter starts at the run's concurrency (``--fxtr-concurrency``). A 429 (or a provider's
``retry_after``) cuts it to 80% (at least 1) once per episode, and below the calls in flight
with it (a level it remembers as ``ceiling``): the 429s of calls that were already in flight
when it was cut do not cut it again, but bring it down to the calls still in flight (not
below a quarter of the ceiling). It also pauses the model for the ``Retry-After`` seconds.
Each run of as many consecutive clean calls as the current limit raises it by one, up to the
start; the step up to the ceiling takes ``PROBE`` times as many. Server errors and timeouts
do not cut it (they are not the caller's pace), but they are not clean either. Every change
is kept in ``history``. docs/cost.md's Decisions give the reading of DESIGN §14.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import time
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

DEFAULT_START = 32
"""The start of a limiter when no run set one (``launch``'s default concurrency)."""

CUT = 0.8
"""The factor a rate-limit episode cuts the limit by."""
PROBE = 8
"""Raising the limit back to where 429s began takes this many times the usual clean calls."""

start_limit: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "fxtr_start_limit", default=None
)
"""The start value of the limiters the current run makes (``--fxtr-concurrency``)."""
adaptive: contextvars.ContextVar[bool] = contextvars.ContextVar("fxtr_adaptive", default=True)
"""``False``: limiters made now keep their start value (a static limit, for comparison)."""


class AdaptiveLimiter:
    """At most ``limit`` calls in flight to one model at one server, adapted to 429s."""

    def __init__(
        self,
        key: str,
        start: int,
        *,
        adapt: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if start < 1:
            msg = f"A limiter starts at 1 call or more, got {start!r}."
            raise ValueError(msg)
        self.key = key
        self.adapt = adapt
        """``False``: a static limit (no cut, no pause), to compare with."""
        self.start = start
        self.clock = clock
        """Seconds, for pauses; the event loop's clock must agree (both monotonic)."""
        self.limit = start
        self.in_flight = 0
        self.clean = 0
        self.episode = 0
        """Counts the cuts; a call remembers the episode it started in."""
        self.paused_until = 0.0
        self.ceiling: int | None = None
        """The calls in flight when the last episode's first 429 came, until the limit passes
        it: the level where the server began refusing, approached slowly."""
        self.rate_limited = 0
        """429s (and other rate-limit answers) seen."""
        self.history: list[dict[str, Any]] = []
        """``{"at", "limit", "why"}`` for every change of the limit, and every pause."""
        self._waiters: collections.deque[asyncio.Future[int]] = collections.deque()
        """Calls waiting for a slot, first come first served; each is handed its episode."""
        self._timer: asyncio.TimerHandle | None = None
        """Set while waiters wait for a pause to end: it hands them their slots then."""

    def __repr__(self) -> str:
        return f"AdaptiveLimiter({self.key!r}, limit={self.limit}/{self.start})"

    async def acquire(self) -> int:
        """Wait for a slot (and for any pause to end); the episode the call starts in.

        Waiters are served first come, first served: a slot that frees (or a pause that ends)
        is handed to the first waiter, which holds it from then on, so no waiter is ever put
        back in line and a pause ends with a timer, not with a release that may never come.
        """
        if not self._waiters and self._open():
            self.in_flight += 1
            return self.episode
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._dispatch()
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed a slot as it was cancelled
                self.in_flight -= 1
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            self._dispatch()
            raise

    def _open(self) -> bool:
        """Whether a call may start now: a free slot and no pause."""
        return self.in_flight < self.limit and self.clock() >= self.paused_until

    def _dispatch(self) -> None:
        """Hand the free slots to the first waiters, or wake them when the pause ends."""
        while self._waiters and self._waiters[0].done():  # cancelled while waiting
            self._waiters.popleft()
        if not self._waiters:
            return
        wait = self.paused_until - self.clock()
        if wait > 0:
            if self._timer is None:
                self._timer = self._waiters[0].get_loop().call_later(wait, self._pause_over)
            return
        while self._waiters and self.in_flight < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(self.episode)

    def _pause_over(self) -> None:
        self._timer = None
        self._dispatch()  # a pause made longer meanwhile sets a new timer

    def release(self, episode: int, outcome: str, retry_after: float | None = None) -> None:
        """A call ended: ``ok``, ``rate_limited`` or ``error`` (anything else)."""
        self.in_flight -= 1
        now = self.clock()
        if outcome == "ok":
            self.clean += 1
            probing = self.ceiling is not None and self.limit + 1 >= self.ceiling
            if self.clean >= self.limit * (PROBE if probing else 1) and self.limit < self.start:
                self.limit += 1
                self.clean = 0
                if self.ceiling is not None and self.limit >= self.ceiling:
                    self.ceiling = None  # the level where 429s began is passed: forgotten
                self._note("raised after clean calls")
        elif outcome == "rate_limited" and not self.adapt:
            self.rate_limited += 1
        elif outcome == "rate_limited":
            self.rate_limited += 1
            self.clean = 0
            if episode == self.episode:  # the first 429 of an episode: one cut
                self.episode += 1
                began = self.in_flight + 1  # in flight with this one: where 429s began
                self.limit = max(1, int(self.limit * CUT))
                self.ceiling = None
                if began > 1:  # not a call alone: below that level, and remember it
                    self.ceiling = began
                    self.limit = min(self.limit, began - 1)
                self._note("cut after a rate limit")
            elif self.in_flight < self.limit:
                # a 429 of a call already in flight at the cut: no cut, but the limit comes
                # down to the calls the server still holds (a burst's 429s bring it to what
                # the server admits, in one episode), not below a quarter of where 429s began
                limit = max(1, self.in_flight, (self.ceiling or 0) // 4)
                if limit < self.limit:
                    self.limit = limit
                    self._note("cut to the calls in flight")
            if retry_after and now + retry_after > self.paused_until:
                self.paused_until = now + retry_after
                self._note(f"paused {retry_after:g}s (Retry-After)")
        else:
            self.clean = 0
        self._dispatch()

    def _note(self, why: str) -> None:
        self.history.append({"at": time.time(), "limit": self.limit, "why": why})

    @property
    def changed(self) -> bool:
        """Whether the limit ever moved from its start."""
        return any(h["limit"] != self.start for h in self.history)

    def to_json(self) -> dict[str, Any]:
        """The limiter as the job record keeps it."""
        return {
            "start": self.start,
            "limit": self.limit,
            "rate_limited": self.rate_limited,
            "history": list(self.history),
        }


_LIMITERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, AdaptiveLimiter]] = (
    weakref.WeakKeyDictionary()
)


def limiter_key(base_url: str, model: str) -> str:
    """The key of a limiter: the provider's base URL and the model."""
    return f"{base_url.rstrip('/')}#{model}"


def limiter_for(base_url: str, model: str) -> AdaptiveLimiter:
    """The limiter of this model at this server, on the running event loop."""
    table = _LIMITERS.setdefault(asyncio.get_running_loop(), {})
    key = limiter_key(base_url, model)
    limiter = table.get(key)
    if limiter is None:
        limiter = table[key] = AdaptiveLimiter(
            key, start_limit.get() or DEFAULT_START, adapt=adaptive.get()
        )
    return limiter


def limiters(loop: asyncio.AbstractEventLoop | None = None) -> dict[str, AdaptiveLimiter]:
    """Every limiter of a loop (the running one by default), by key."""
    loop = loop or asyncio.get_running_loop()
    return dict(_LIMITERS.get(loop, {}))


def outcome_of(error: BaseException | None) -> tuple[str, float | None]:
    """``(outcome, retry_after)`` of a call that ended with ``error`` (or ``None``)."""
    if error is None:
        return "ok", None
    failure = getattr(error, "failure", None)
    retry_after = getattr(failure, "retry_after", None)
    status = getattr(failure, "status_code", None)
    if status == 429 or getattr(failure, "category", None) == "rate_limit":
        return "rate_limited", retry_after
    if retry_after is not None and (status is None or status < 500):
        return "rate_limited", retry_after
    return "error", None


@contextlib.asynccontextmanager
async def limited(base_url: str, model: str) -> AsyncIterator[None]:
    """Around one HTTP call: a slot of its limiter, and the outcome told back."""
    limiter = limiter_for(base_url, model)
    episode = await limiter.acquire()
    error: BaseException | None = None
    try:
        yield
    except BaseException as exc:
        error = exc
        raise
    finally:
        outcome, retry_after = outcome_of(error)
        if isinstance(error, asyncio.CancelledError):
            outcome = "error"
        limiter.release(episode, outcome, retry_after)
