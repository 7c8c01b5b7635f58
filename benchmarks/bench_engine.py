"""Engine overhead on a 10,000-invocation job (map over 100 x 100), against baselines.

Prints ratios measured in the same run (machines are noisy; compare ratios, not seconds):

- cold run (verify off) / bare ``asyncio.gather`` of the same 10,000 coroutines
- cold run (verify off) / hand-written asyncio + sha256 fingerprint + diskcache set per result
- fully cached rerun (verify off) / 10,000 diskcache gets
- verification: cold run with verify on / cold run with verify off
- hermeticity notices: cold run with them on / off
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import tempfile
import time
from typing import Annotated

import diskcache

from fxtr import Array, ArrayHandle, StepContext, WorkflowContext, launch, step, workflow


@step(name="bench.add")
async def add(context: StepContext, a: int, b: int) -> int:
    return a + b


@workflow(name="bench.grid")
async def grid(
    context: WorkflowContext,
    xs: Annotated[ArrayHandle[int], "[x: int]"],
    ys: Annotated[ArrayHandle[int], "[y: int]"],
) -> Annotated[ArrayHandle[int], "[x: int, y: int]"]:
    return context.run_step("add", add, {"a": xs, "b": ys}, map_over=["x", "y"])


async def _trivial(a: int, b: int) -> int:
    return a + b


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100, help="keys per dimension (n*n steps)")
    args = parser.parse_args()
    n = args.n
    xs = Array.from_mapping({i: i for i in range(n)}, dims=["x"], value_type=int)
    ys = Array.from_mapping({i: 10 * i for i in range(n)}, dims=["y"], value_type=int)
    inputs = {"xs": xs, "ys": ys}
    tmp = tempfile.mkdtemp()

    def timed(fn) -> float:  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    async def gather_baseline() -> None:
        await asyncio.gather(*(_trivial(i, j) for i in range(n) for j in range(n)))

    async def cache_baseline(cache: diskcache.Cache) -> None:
        async def one(i: int, j: int) -> None:
            r = await _trivial(i, j)
            fp = hashlib.sha256(json.dumps({"a": i, "b": j}).encode()).hexdigest()
            cache.set(
                f"e|bench.grid/add[x={i},y={j}]", json.dumps({"fingerprint": fp, "result": r})
            )

        await asyncio.gather(*(one(i, j) for i in range(n) for j in range(n)))

    base_gather = timed(lambda: asyncio.run(gather_baseline()))
    bcache = diskcache.Cache(f"{tmp}/baseline", eviction_policy="none")
    base_cold = timed(lambda: asyncio.run(cache_baseline(bcache)))

    def gets() -> None:
        for i in range(n):
            for j in range(n):
                bcache.get(f"e|bench.grid/add[x={i},y={j}]")

    base_gets = timed(gets)

    cold = timed(lambda: asyncio.run(launch(grid, inputs, store=f"{tmp}/a", verify=False)))
    cached = timed(lambda: asyncio.run(launch(grid, inputs, store=f"{tmp}/a", verify=False)))
    cached_verify = timed(lambda: asyncio.run(launch(grid, inputs, store=f"{tmp}/a")))
    cold_verify = timed(lambda: asyncio.run(launch(grid, inputs, store=f"{tmp}/b")))
    cold_open = timed(
        lambda: asyncio.run(launch(grid, inputs, store=f"{tmp}/c", verify=False, hermetic=False))
    )
    shutil.rmtree(tmp, ignore_errors=True)
    steps = n * n
    print(f"{steps} invocations of a trivial step")
    print(f"baseline gather            {base_gather:8.3f} s")
    print(f"baseline sha256+set        {base_cold:8.3f} s")
    print(f"baseline {steps} gets        {base_gets:8.3f} s")
    print(
        f"fxtr cold (verify off)     {cold:8.3f} s   {cold / base_gather:5.1f} x gather   "
        f"{cold / base_cold:5.2f} x sha256+set   ({cold / steps * 1e6:.0f} us/step)"
    )
    print(f"fxtr cached (verify off)   {cached:8.3f} s   {cached / base_gets:5.2f} x gets")
    print(
        f"fxtr cached (verify on)    {cached_verify:8.3f} s   "
        f"{cached_verify / base_gets:5.2f} x gets"
    )
    print(
        f"fxtr cold (verify on)      {cold_verify:8.3f} s   verification adds "
        f"{(cold_verify / cold - 1) * 100:5.1f} %"
    )
    print(
        f"fxtr cold (hermetic off)   {cold_open:8.3f} s   hermeticity watch costs "
        f"{(cold / cold_open - 1) * 100:5.1f} %"
    )


if __name__ == "__main__":
    main()
