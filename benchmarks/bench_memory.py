"""Peak memory of a job of 100,000 trivial steps (tracemalloc), and where it goes.

Prints the peak in MB, the bytes per invocation, and the top allocation sites still held at
the end (``--top N``); ``--timing`` also times a cold run with verification, untraced. The
targets: a peak of at most 300 MB, and under 15 s with verification, for 100,000 invocations.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import tempfile
import time
import tracemalloc

from benchmarks.bench_engine import grid
from fxtr import Array, launch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--x", type=int, default=1000)
    parser.add_argument("--y", type=int, default=100)
    parser.add_argument("--top", type=int, default=0)
    parser.add_argument("--verify", action="store_true", help="verify on (default off)")
    parser.add_argument(
        "--timing", action="store_true", help="also time a cold run with verification, untraced"
    )
    args = parser.parse_args()
    xs = Array.from_mapping({i: i for i in range(args.x)}, dims=["x"], value_type=int)
    ys = Array.from_mapping({i: 10 * i for i in range(args.y)}, dims=["y"], value_type=int)
    if args.timing:  # first, in a fresh process, before the traced run fills the heap
        tmp = tempfile.mkdtemp()
        try:
            t = time.perf_counter()
            timed = asyncio.run(launch(grid, {"xs": xs, "ys": ys}, store=f"{tmp}/s"))
            cold_verify = time.perf_counter() - t
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(
            f"cold run with verification, untraced: {cold_verify:.1f} s for "
            f"{len(timed.invocations)} invocations ({timed.status}; target < 15 s)"
        )
        del timed
    tmp = tempfile.mkdtemp()
    try:
        gc.collect()
        tracemalloc.start(1)
        base, _ = tracemalloc.get_traced_memory()
        t = time.perf_counter()
        result = asyncio.run(
            launch(grid, {"xs": xs, "ys": ys}, store=f"{tmp}/s", verify=args.verify)
        )
        elapsed = time.perf_counter() - t
        _, peak = tracemalloc.get_traced_memory()
        snapshot = tracemalloc.take_snapshot() if args.top else None
        tracemalloc.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n = len(result.invocations)
    print(f"{n} invocations ({result.status}) in {elapsed:.1f} s under tracemalloc")
    print(f"peak {(peak - base) / 1e6:7.1f} MB   {(peak - base) / n:7.0f} bytes/invocation")
    if snapshot is not None:
        print("largest allocation sites still held at the end (result kept alive):")
        for stat in snapshot.statistics("lineno")[: args.top]:
            print(f"  {stat.size / 1e6:7.1f} MB  {stat.count:8d}  {stat.traceback}")


if __name__ == "__main__":
    main()
