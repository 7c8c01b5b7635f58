"""Per-sample addressing costs nothing measurable: 1,000 cells x 10 samples vs 10,000 cells.

Both jobs make 10,000 invocations of the same trivial step; the sampled one maps over 1,000
cases with ``samples=10`` (addresses ``[case=i,sample=j]``), the other over 10,000 cases.
Prints the ratio sampled / unsampled for a cold run and a fully cached rerun, each the best
of ``--repeat`` interleaved runs (target: within 5%).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from typing import Annotated

from fxtr import Array, ArrayHandle, StepContext, WorkflowContext, launch, step, workflow


@step(name="bench.draw")
async def draw(context: StepContext, case: int) -> int:
    return case + (context.sample or 0)


@workflow(name="bench.sampled")
async def sampled(
    context: WorkflowContext, cases: Annotated[ArrayHandle[int], "[case: int]"], samples: int
) -> Annotated[ArrayHandle[int], "[case: int, sample: int]"]:
    return context.run_step("draw", draw, {"case": cases}, map_over=["case"], samples=samples)


@workflow(name="bench.unsampled")
async def unsampled(
    context: WorkflowContext, cases: Annotated[ArrayHandle[int], "[case: int]"]
) -> Annotated[ArrayHandle[int], "[case: int]"]:
    return context.run_step("draw", draw, {"case": cases}, map_over=["case"])


def _cases(n: int) -> Array[int]:
    return Array.from_mapping({i: i for i in range(n)}, dims=["case"], value_type=int)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    total = args.cells * args.samples
    tmp = tempfile.mkdtemp()
    times: dict[str, list[float]] = {k: [] for k in ("s-cold", "u-cold", "s-hit", "u-hit")}

    def timed(coro_fn) -> float:  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        asyncio.run(coro_fn())
        return time.perf_counter() - t

    try:
        for r in range(args.repeat):
            s_in = {"cases": _cases(args.cells), "samples": args.samples}
            u_in = {"cases": _cases(total)}
            s_store, u_store = f"{tmp}/s{r}", f"{tmp}/u{r}"
            times["s-cold"].append(
                timed(lambda: launch(sampled, s_in, store=s_store, verify=False))  # noqa: B023
            )
            times["u-cold"].append(
                timed(lambda: launch(unsampled, u_in, store=u_store, verify=False))  # noqa: B023
            )
            times["s-hit"].append(
                timed(lambda: launch(sampled, s_in, store=s_store, verify=False))  # noqa: B023
            )
            times["u-hit"].append(
                timed(lambda: launch(unsampled, u_in, store=u_store, verify=False))  # noqa: B023
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    best = {k: min(v) for k, v in times.items()}
    print(f"{total} invocations: {args.cells} cells x {args.samples} samples vs {total} cells")
    for kind, label in (("cold", "cold (verify off)"), ("hit", "cached (verify off)")):
        s, u = best[f"s-{kind}"], best[f"u-{kind}"]
        print(
            f"{label:22} sampled {s:7.3f} s   unsampled {u:7.3f} s   "
            f"ratio {s / u:5.3f} ({(s / u - 1) * 100:+.1f} %)"
        )


if __name__ == "__main__":
    main()
