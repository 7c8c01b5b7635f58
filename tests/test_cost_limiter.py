"""Adaptive concurrency (DESIGN §14): one limiter per provider base URL and model."""

from __future__ import annotations

import asyncio
import json
import textwrap

import pytest

from fxtr.models import ModelCallError, ModelCallFailure
from fxtr.models._limiter import (
    PROBE,
    AdaptiveLimiter,
    limited,
    limiter_for,
    limiters,
    start_limit,
)
from tests.loopback import CapacityServer


def _rate_limited(retry_after=None):
    return ModelCallError(
        ModelCallFailure(
            category="rate_limit", description="HTTP 429", status_code=429, retry_after=retry_after
        )
    )


@pytest.mark.asyncio
async def test_a_429_cuts_once_per_episode_and_clean_calls_raise_it_back():
    lim = AdaptiveLimiter("u#m", 10)
    episodes = [await lim.acquire() for _ in range(10)]
    assert lim.in_flight == 10
    lim.release(episodes[0], "rate_limited")  # the first 429 of an episode: cut to 80%
    assert lim.limit == 8 and lim.ceiling == 10
    for e in episodes[1:5]:  # in flight at the cut: no cut, down to the 5 the server holds
        lim.release(e, "rate_limited")
    assert lim.limit == 5 and lim.rate_limited == 5 and lim.episode == 1
    for e in episodes[5:]:
        lim.release(e, "ok")
    assert lim.limit == 6 and lim.clean == 0  # a run of `limit` (5) clean calls: one up
    fresh = await lim.acquire()  # started after the cut: a new episode
    lim.release(fresh, "rate_limited")
    assert lim.limit == 4  # int(6 * 0.8); alone in flight: no level to remember
    assert lim.ceiling is None
    for _ in range(4):
        lim.release(await lim.acquire(), "ok")
    assert lim.limit == 5  # a run of `limit` clean calls raises it by one
    for _ in range(7):
        lim.release(await lim.acquire(), "error")  # 5xx and timeouts: no cut, not clean
    assert lim.limit == 5 and lim.clean == 0
    for _ in range(200):
        lim.release(await lim.acquire(), "ok")
    assert lim.limit == 10  # never above its start
    assert [h["limit"] for h in lim.history] == [8, 7, 6, 5, 6, 4, 5, 6, 7, 8, 9, 10]


@pytest.mark.asyncio
async def test_a_burst_settles_at_what_the_server_admits_in_one_episode():
    """32 sent, the server holds 8 and refuses 24: the limit is 8 when the 429s are in."""
    lim = AdaptiveLimiter("u#m", 32)
    episodes = [await lim.acquire() for _ in range(32)]
    for e in episodes[8:]:
        lim.release(e, "rate_limited")
    assert lim.limit == 8 and lim.episode == 1 and lim.ceiling == 32
    # a rate limit that refuses everything in flight does not take it below a quarter
    lim = AdaptiveLimiter("u#m", 32)
    for e in [await lim.acquire() for _ in range(32)]:
        lim.release(e, "rate_limited")
    assert lim.limit == 8


@pytest.mark.asyncio
async def test_the_level_where_429s_began_is_approached_slowly():
    """Steady state at a server admitting 8: one probe of 9 every 8 x 8 clean calls."""
    lim = AdaptiveLimiter("u#m", 32)
    held = [await lim.acquire() for _ in range(9)]
    lim.release(held.pop(), "rate_limited")  # the 9th was refused: below 9, and remembered
    assert lim.limit == 8 and lim.ceiling == 9
    for e in held[1:]:
        lim.release(e, "rate_limited")  # and, say, all but one of the others: down to 1...
    assert lim.limit == 2  # ...but not below a quarter of 9
    lim.release(held[0], "ok")
    lim.release(await lim.acquire(), "ok")
    assert lim.limit == 3  # far below the ceiling: one up after `limit` clean calls
    for _ in range(3 + 4 + 5 + 6 + 7):
        lim.release(await lim.acquire(), "ok")
    assert lim.limit == 8  # just under the ceiling now
    for _ in range(8 * PROBE - 1):
        lim.release(await lim.acquire(), "ok")
    assert lim.limit == 8
    lim.release(await lim.acquire(), "ok")
    assert lim.limit == 9 and lim.ceiling is None  # reached: forgotten, the usual pace on


@pytest.mark.asyncio
async def test_the_limit_never_goes_below_one_and_retry_after_pauses_the_model():
    lim = AdaptiveLimiter("u#m", 1)
    lim.release(await lim.acquire(), "rate_limited", retry_after=0.3)
    assert lim.limit == 1
    loop = asyncio.get_running_loop()
    start = loop.time()
    lim.release(await lim.acquire(), "ok")
    assert loop.time() - start >= 0.25  # paused for Retry-After


@pytest.mark.asyncio
async def test_limits_are_per_base_url_and_model_and_start_at_the_run_concurrency():
    token = start_limit.set(5)
    try:
        a = limiter_for("http://one/v1", "m")
        assert limiter_for("http://one/v1/", "m") is a
        assert limiter_for("http://one/v1", "n") is not a
        assert limiter_for("http://two/v1", "m") is not a
        assert a.start == a.limit == 5
    finally:
        start_limit.reset(token)
    with pytest.raises(ModelCallError):
        async with limited("http://one/v1", "m"):
            raise _rate_limited()
    assert limiters()["http://one/v1#m"].limit == 4


@pytest.mark.asyncio
async def test_a_limit_waits_for_a_slot():
    lim = AdaptiveLimiter("u#m", 2)
    first, second = await lim.acquire(), await lim.acquire()
    third = asyncio.ensure_future(lim.acquire())
    await asyncio.sleep(0.01)
    assert not third.done()
    lim.release(first, "ok")
    await asyncio.wait_for(third, 1)
    assert lim.in_flight == 2
    lim.release(second, "ok")
    lim.release(third.result(), "ok")
    assert lim.in_flight == 0


@pytest.mark.asyncio
async def test_a_200_case_eval_against_a_server_admitting_8_at_once(monkeypatch):
    from fxtr import Array, launch
    from fxtr.evals import Case, Model, evaluate, includes
    from fxtr.models import set_price

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-loopback")
    set_price("loopback-m", input=1.0, output=1.0)
    with CapacityServer(capacity=8, latency=0.02) as server:
        model = Model("openai-compatible/loopback-m", base_url=server.url)
        cases = {f"c{i}": Case(id=f"c{i}", input=f"q{i}", target="ok") for i in range(200)}
        job = await launch(
            evaluate,
            {
                "model": Array.from_mapping({model.name: model}, dims=["model"]),
                "case": Array.from_mapping(cases, dims=["case"]),
                "scorer": includes(),
            },
            concurrency=32,
            verify=False,
        )
    assert job.status == "succeeded", [i.error for i in job.invocations if i.error][:3]
    assert server.peak <= 8
    assert server.rejected / server.requests < 0.25, (server.rejected, server.requests)
    (lim,) = limiters().values()
    assert lim.start == 32 and lim.history and min(h["limit"] for h in lim.history) < 32


EVAL = textwrap.dedent(
    """
    import os

    import pytest

    from fxtr.evals import Case, Model, evaluate, includes

    MODEL = Model("openai-compatible/loopback-m", base_url=os.environ["EVAL_URL"])
    CASES = [Case(id=f"c{i}", input=f"q{i}", target="ok") for i in range(40)]

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes()})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", CASES)
    def test_loopback(model, case, result):
        assert result is not None
    """
)


def test_the_job_record_keeps_the_history_and_the_summary_the_final_limit(pytester, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-loopback")
    pytester.makepyfile(test_loopback=EVAL)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    with CapacityServer(capacity=4, latency=0.02) as server:
        monkeypatch.setenv("EVAL_URL", server.url)
        result = pytester.runpytest(
            "-p", "no:cacheprovider", "--fxtr-concurrency", "16", "-W", "ignore"
        )
    result.assert_outcomes(passed=40)
    assert server.rejected > 0
    result.stdout.fnmatch_lines(
        [f"concurrency of loopback-m at {server.url}: * at the end (started at 16; *rate-limited)"]
    )
    from fxtr.store import open_store

    (record,) = open_store(pytester.path / ".fxtr").iter_jobs()
    history = record["limiters"][f"{server.url}#loopback-m"]
    assert history["start"] == 16 and history["rate_limited"] == server.rejected
    assert json.dumps(history)  # kept as JSON in the record
    assert history["history"][0]["why"] == "cut after a rate limit"
