"""While a job runs the collector runs less and leaves the older heap alone (``_gc``); a
process that tuned or disabled its collector is left as it was, and everything is restored
when the job ends, whether it succeeded or raised."""

from __future__ import annotations

import gc

import pytest

from fxtr import ScalarHandle, StepContext, WorkflowContext, run, step, workflow
from fxtr.experiment._gc import DEFAULT_THRESHOLDS, JOB_THRESHOLD

seen: list[tuple[tuple[int, int, int], int, bool]] = []


@step(name="gc_test.look")
async def look(context: StepContext, n: int) -> int:
    seen.append((gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()))
    if n < 0:
        raise ValueError("asked to fail")
    return n


@workflow(name="gc_test.job")
async def job(context: WorkflowContext, n: int) -> ScalarHandle[int]:
    return context.run_step("look", look, {"n": n})  # type: ignore[return-value]


@pytest.fixture
def collector():
    """The collector as CPython starts it; put back as the test found it."""
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    gc.unfreeze()
    gc.set_threshold(*DEFAULT_THRESHOLDS)
    gc.enable()
    seen.clear()
    yield
    gc.set_threshold(*threshold)
    if not enabled:
        gc.disable()


def test_a_job_collects_less_and_freezes_the_heap_it_started_with(tmp_path, collector):
    holder = [object() for _ in range(100)]  # alive before the job: frozen while it runs
    assert run(job, {"n": 1}, store=tmp_path, verify=False).status == "succeeded"
    [(threshold, frozen, enabled)] = seen
    assert threshold == (JOB_THRESHOLD, *DEFAULT_THRESHOLDS[1:]) and enabled
    assert frozen >= len(holder)
    assert gc.get_threshold() == DEFAULT_THRESHOLDS and gc.get_freeze_count() == 0


def test_a_failed_job_restores_the_collector_too(tmp_path, collector):
    assert run(job, {"n": -1}, store=tmp_path, verify=False).status == "failed"
    assert seen[0][0][0] == JOB_THRESHOLD
    assert gc.get_threshold() == DEFAULT_THRESHOLDS and gc.get_freeze_count() == 0


def test_a_tuned_frozen_or_disabled_collector_is_left_as_it_is(tmp_path, collector):
    gc.set_threshold(5_000, 20, 20)
    run(job, {"n": 1}, store=tmp_path / "a", verify=False)
    assert seen[-1][:2] == ((5_000, 20, 20), 0)
    gc.set_threshold(*DEFAULT_THRESHOLDS)
    gc.disable()
    run(job, {"n": 2}, store=tmp_path / "b", verify=False)
    assert seen[-1] == (DEFAULT_THRESHOLDS, 0, False) and not gc.isenabled()
    gc.enable()
    gc.freeze()  # the process froze its own heap (before forking workers, say)
    frozen = gc.get_freeze_count()
    run(job, {"n": 3}, store=tmp_path / "c", verify=False)
    assert seen[-1][0][0] == JOB_THRESHOLD and seen[-1][1] > frozen // 2
    assert gc.get_freeze_count() > frozen // 2  # not thawed (frozen objects may still die)
    gc.unfreeze()
