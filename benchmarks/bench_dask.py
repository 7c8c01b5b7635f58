"""1,000 steps that each sleep 50 ms: the local executor against Dask in-process (threads)
and Dask with 2 worker processes. Prints each run's time and the wall time it adds per step over
the ideal (1,000 x 50 ms / concurrency); bare Dask measured about 2-3 ms per task here."""

from __future__ import annotations

import asyncio
import tempfile
import time
from typing import Annotated

from fxtr import Array, ArrayHandle, StepContext, WorkflowContext, launch, step, workflow
from fxtr.integrations.dask import DaskExecutor

STEPS, SLEEP, CONCURRENCY = 1000, 0.05, 128


@step(name="bench.sleep")
async def sleepy(context: StepContext, i: int) -> int:
    await asyncio.sleep(SLEEP)
    return i


@workflow(name="bench.sleeps")
async def sleeps(
    context: WorkflowContext, i: Annotated[ArrayHandle[int], "[i: int]"]
) -> Annotated[ArrayHandle[int], "[i: int]"]:
    return context.run_step("sleep", sleepy, {"i": i}, map_over=["i"])


async def timed(executor) -> float:
    items = Array.from_mapping({i: i for i in range(STEPS)}, dims=["i"], value_type=int)
    if executor is not None:
        await executor.start()
    start = time.perf_counter()
    result = await launch(
        sleeps,
        {"i": items},
        store=tempfile.mkdtemp(),
        verify=False,
        concurrency=CONCURRENCY,
        executor=executor,
    )
    elapsed = time.perf_counter() - start
    assert result.status == "succeeded"
    if executor is not None:
        await executor.aclose()
    return elapsed


async def main() -> None:
    ideal = STEPS * SLEEP / CONCURRENCY
    runs = {
        "local executor": await timed(None),
        "dask, in-process (threads)": await timed(
            DaskExecutor("local", processes=False, n_workers=2, threads_per_worker=64)
        ),
        "dask, 2 worker processes": await timed(
            DaskExecutor("local", processes=True, n_workers=2, threads_per_worker=64)
        ),
    }
    print(
        f"{STEPS} steps x {SLEEP * 1000:.0f} ms at concurrency {CONCURRENCY}; ideal {ideal:.2f} s"
    )
    for name, elapsed in runs.items():
        overhead = (elapsed - ideal) / STEPS * 1000
        print(f"{name:28s} {elapsed:6.2f} s   {overhead:5.2f} ms of wall time per step over ideal")


if __name__ == "__main__":
    asyncio.run(main())
