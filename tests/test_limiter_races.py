"""The adaptive limiter under every interleaving of admits, 429s, pauses, releases and
cancellations (issue 36 item 1): every waiter is eventually admitted or cancelled."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from fxtr.models._limiter import AdaptiveLimiter


@pytest.mark.asyncio
async def test_waiters_queued_behind_a_retry_after_pause_are_admitted_when_it_ends():
    lim = AdaptiveLimiter("u#m", 2)
    a, b = await lim.acquire(), await lim.acquire()
    waiters = [asyncio.ensure_future(lim.acquire()) for _ in range(3)]
    await asyncio.sleep(0)
    lim.release(a, "rate_limited", retry_after=0.05)  # cut to 1, pause 50 ms
    lim.release(b, "rate_limited", retry_after=0.05)  # same episode: no second cut
    assert lim.in_flight == 0 and lim.limit == 1
    admitted = []
    for _ in range(3):  # the limit stays 1 (no clean call raises it): one at a time
        done, _pending = await asyncio.wait(
            [w for w in waiters if w not in admitted], timeout=2, return_when="FIRST_COMPLETED"
        )
        assert done, f"waiters stuck after the pause: {lim!r}, in flight {lim.in_flight}"
        (first,) = done
        admitted.append(first)
        lim.release(first.result(), "error")
    assert lim.in_flight == 0


@pytest.mark.asyncio
async def test_no_call_starts_during_a_pause_and_waiters_keep_their_order():
    lim = AdaptiveLimiter("u#m", 3)
    held = [await lim.acquire() for _ in range(3)]
    order: list[int] = []

    async def call(i: int) -> None:
        episode = await lim.acquire()
        order.append(i)
        assert time.monotonic() >= lim.paused_until
        lim.release(episode, "ok")

    tasks = [asyncio.ensure_future(call(i)) for i in range(6)]
    await asyncio.sleep(0)
    lim.release(held[0], "rate_limited", retry_after=0.05)
    paused_at = time.monotonic()
    for e in held[1:]:
        lim.release(e, "ok")
    await asyncio.wait_for(asyncio.gather(*tasks), 2)
    assert time.monotonic() - paused_at >= 0.04
    assert order == list(range(6))


@pytest.mark.asyncio
async def test_a_waiter_cancelled_as_it_is_handed_a_slot_gives_the_slot_back():
    lim = AdaptiveLimiter("u#m", 1)
    first = await lim.acquire()
    second = asyncio.ensure_future(lim.acquire())
    third = asyncio.ensure_future(lim.acquire())
    await asyncio.sleep(0)
    lim.release(first, "ok")  # hands the slot to `second`, which has not run yet
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    lim.release(await asyncio.wait_for(third, 1), "ok")
    assert lim.in_flight == 0


class LimiterMachine(RuleBasedStateMachine):
    """Random interleavings on a real event loop whose clock (and the limiter's) is virtual,
    so that each example is deterministic and pauses take no real time."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.loop = asyncio.new_event_loop()
        self.loop.time = lambda: self.now  # type: ignore[method-assign]
        self.start = 4
        self.lim = AdaptiveLimiter("u#m", self.start, clock=lambda: self.now)
        self.waiting: list[asyncio.Task[int]] = []
        self.held: list[int] = []  # episodes of the admitted calls not yet released

    def _run(self) -> None:
        for _ in range(3):
            self.loop.run_until_complete(asyncio.sleep(0))
        for task in [t for t in self.waiting if t.done()]:
            self.waiting.remove(task)
            if not task.cancelled():
                assert self.now >= self.lim.paused_until, "a call started during a pause"
                self.held.append(task.result())

    @rule(n=st.integers(1, 3))
    def call(self, n: int) -> None:
        for _ in range(n):
            self.waiting.append(self.loop.create_task(self.lim.acquire()))
        self._run()

    @precondition(lambda self: self.held)
    @rule(
        i=st.integers(0, 100),
        outcome=st.sampled_from(["ok", "ok", "error", "rate_limited"]),
        retry_after=st.sampled_from([None, 0.001, 0.005]),
    )
    def release(self, i: int, outcome: str, retry_after: float | None) -> None:
        episode = self.held.pop(i % len(self.held))
        self.lim.release(episode, outcome, retry_after if outcome == "rate_limited" else None)
        self._run()

    @precondition(lambda self: self.waiting)
    @rule(i=st.integers(0, 100))
    def cancel(self, i: int) -> None:
        self.waiting[i % len(self.waiting)].cancel()
        self._run()

    @rule(ms=st.sampled_from([1, 3]))
    def wait(self, ms: int) -> None:
        self.now += ms / 1000
        self._run()

    @invariant()
    def within_bounds(self) -> None:
        assert 1 <= self.lim.limit <= self.start
        assert self.lim.in_flight == len(self.held)
        if self.waiting and self.lim.clock() >= self.lim.paused_until:
            assert self.lim.in_flight >= self.lim.limit  # nobody waits for a free slot

    def teardown(self) -> None:
        try:
            for _ in range(10_000):  # release all: every waiter must get its turn
                if not (self.waiting or self.held):
                    break
                while self.held:
                    self.lim.release(self.held.pop(), "ok")
                self.now += 0.001
                self._run()
            assert not self.waiting, (
                f"{len(self.waiting)} waiter(s) never admitted: {self.lim!r}, "
                f"in flight {self.lim.in_flight}, paused until {self.lim.paused_until}"
            )
            assert self.lim.in_flight == 0
        finally:
            for task in self.waiting:
                task.cancel()
            self.loop.run_until_complete(asyncio.sleep(0))
            self.loop.close()


LimiterMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_limiter_interleavings = LimiterMachine.TestCase
