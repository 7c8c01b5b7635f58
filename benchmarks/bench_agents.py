"""An agent eval's cost per turn: fxtr's loop (every turn and tool call a cached step) against
a hand-written asyncio loop making the same calls with no cache, in one run.

1,000 trajectories x 5 turns (4 tool calls, then an answer) on a mock model that takes
``--delay`` seconds a call (default 0.5 s, a fast hosted model's latency), both loops at the
same concurrency. Prints each loop's time and CPU per turn, the ratio fxtr / hand-written
for a cold run (target <= 1.5x), and how much faster a cached rerun is than the cold run
(target >= 20x): the rerun asks nothing.

Where the time goes (cProfile, 200-300 trajectories at 0-50 ms): a cold turn is two steps
(the turn and its tool call), each scheduled, bound, looked up, claimed, run, recorded and
redacted by the engine: about 2 ms of one core per turn, spread over the store's
transactions (three per step: look up, claim, read again), scheduling and binding,
encoding results and inputs, and the collector. A cached rerun serves each finished
trajectory from its record (``fxtr.agents._memo``): one read of all the records and one of
all their steps' entries, then every step recorded from the cache, about 0.2 ms per turn
(it was 1.4 ms replaying step by step).

So at 0.5 s a call the loop waits on the model and fxtr's cost is hidden: cold 1.05x,
cached rerun 53x faster (load 1.5; 1.13x and 26x at load 5). With a mock that answers in
50-100 ms at concurrency 32 fxtr is CPU-bound: cold 1.34x at 100 ms, 1.71x at 50 ms (load
1.5). Figures in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time

import fxtr
from fxtr.agents import Agent, tool, tool_call
from fxtr.evals import Case, evaluate, includes, register_mock
from fxtr.experiment.arrays import Array
from fxtr.models import (
    AssistantMessage,
    ContentText,
    ModelRequest,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
)

TURNS = 5


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def script(request: ModelRequest) -> object:
    """Four calls of add, then the total: five turns."""
    turn = sum(isinstance(m, AssistantMessage) for m in request.context)
    if turn < TURNS - 1:
        return tool_call("add", a=turn, b=1)
    last = request.context[-1]
    assert isinstance(last, ToolMessage)
    return f"total {last.results[0].content}"


async def hand_written(api, cases: list[Case], concurrency: int) -> list[str]:  # type: ignore[no-untyped-def]
    """The same loop without fxtr: ask, run the tool, send its result back, until an answer."""
    gate = asyncio.Semaphore(concurrency)
    spec = add.spec

    async def one(case: Case) -> str:
        messages: list = [UserMessage(content=(ContentText(text=case.input),))]  # type: ignore[type-arg]
        for i in range(TURNS + 1):
            async with gate:
                reply = await api.generate(ModelRequest(context=tuple(messages), tools=(spec,)))
            calls = [b for b in reply.output if isinstance(b, ToolCall)]
            messages.append(AssistantMessage(content=(), tool_calls=tuple(calls)))
            if not calls:
                return reply.text
            results = []
            for j, c in enumerate(calls):
                results.append(ToolResult(tool_call_id=c.id or f"call_{i}_{j}",
                                          content=str(add.fn(**c.arguments))))  # fmt: skip
            messages.append(ToolMessage(results=tuple(results)))
        return ""

    return await asyncio.gather(*(one(c) for c in cases))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trajectories", type=int, default=1000)
    parser.add_argument("--delay", type=float, default=0.5, help="seconds a model call takes")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--verify", action="store_true", help="verify by replay (as pytest does)")
    args = parser.parse_args()
    model = register_mock("bench-agent", script, delay=args.delay)
    cases = [
        Case(id=f"c{i}", input=f"task {i}", target="total 4") for i in range(args.trajectories)
    ]
    inputs = {
        "model": Array.from_mapping({model.name: model}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": includes(),
        "agent": Agent(tools=(add,)),
    }
    turns = args.trajectories * TURNS
    load = f"{os.getloadavg()[0]:.1f}"
    tmp = tempfile.mkdtemp()
    try:
        t, c = time.perf_counter(), time.process_time()
        answers = asyncio.run(hand_written(model.api(), cases, args.concurrency))
        base, base_cpu = time.perf_counter() - t, time.process_time() - c
        assert answers == ["total 4"] * len(cases), answers[:3]
        run = dict(store=f"{tmp}/store", concurrency=args.concurrency, verify=args.verify)
        t, c = time.perf_counter(), time.process_time()
        cold = fxtr.run(evaluate, inputs, **run)
        cold_s, cold_cpu = time.perf_counter() - t, time.process_time() - c
        assert cold.status == "succeeded"
        t, c = time.perf_counter(), time.process_time()
        hit = fxtr.run(evaluate, inputs, **run)
        hit_s, hit_cpu = time.perf_counter() - t, time.process_time() - c
        assert all(i.from_cache for i in hit.invocations)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"{args.trajectories} trajectories x {TURNS} turns, mock call {args.delay * 1000:.0f} ms, "
        f"concurrency {args.concurrency}, verify {'on' if args.verify else 'off'}, "
        f"load average {load} before, {os.getloadavg()[0]:.1f} after"
    )
    for name, wall, cpu in (
        ("hand-written loop, no cache", base, base_cpu),
        ("fxtr, cold", cold_s, cold_cpu),
        ("fxtr, cached rerun", hit_s, hit_cpu),
    ):
        print(
            f"{name:28} {wall:7.2f} s   {wall / turns * 1000:6.2f} ms/turn   "
            f"CPU {cpu / turns * 1000:5.2f} ms/turn"
        )
    print(f"cold ratio fxtr / hand-written: {cold_s / base:.2f}x (target <= 1.5x)")
    print(f"cached rerun vs cold: {cold_s / hit_s:.1f}x faster (target >= 20x)")


if __name__ == "__main__":
    main()
