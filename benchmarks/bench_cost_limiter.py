"""Adaptive concurrency against a static limit of 32, in the same run (DESIGN §14).

A loopback OpenAI-compatible server on 127.0.0.1 admits 8 requests at once and answers 429
beyond. A 200-case job at concurrency 32 runs against it twice: with fxtr's adaptive
limiter, and with the limiter held static at 32 (the baseline). Prints, for each, the
requests, the share answered 429, failed invocations and wall time, and the ratios.

The job is ``bench_limiter.run_once``'s: a step calling one shared ``OpenAIChatAPI`` with
``generate_with_retries``, or with ``--kit`` the kit's ``evaluate``. ``bench_limiter`` also
runs static limits of 8 and 16.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from benchmarks.bench_limiter import run_once
from fxtr.models import set_price


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--kit", action="store_true", help="run the kit's evaluate")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-loopback")
    set_price("bench-limiter-m", input=1.0, output=1.0)
    static = await run_once(32, False, args.cases, args.capacity, args.latency, args.kit)
    adaptive = await run_once(32, True, args.cases, args.capacity, args.latency, args.kit)
    for name, r in (("static 32", static), ("adaptive", adaptive)):
        print(
            f"{name:>10}: {r['requests']:.0f} requests, {r['rejected']:.0f} answered 429 "
            f"({r['rejected'] / r['requests']:.1%}), {r['failed']:.0f} failed, {r['wall']:.2f} s"
        )
    met = adaptive["rejected"] < adaptive["requests"] / 4 and not adaptive["failed"]
    print(
        f"adaptive / static: 429s x{adaptive['rejected'] / max(1, static['rejected']):.2f}, "
        f"wall time x{adaptive['wall'] / static['wall']:.2f} "
        f"(target: fewer than a quarter of requests answered 429 and no failed case: "
        f"{'met' if met else 'NOT met'})"
    )


if __name__ == "__main__":
    asyncio.run(main())
