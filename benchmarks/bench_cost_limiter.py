"""Adaptive concurrency against a static limit of 32, in the same run (DESIGN §14).

A loopback OpenAI-compatible server on 127.0.0.1 admits 8 requests at once and answers 429
beyond. A 200-case job at concurrency 32 runs against it twice: with fxtr's adaptive
limiter, and with the limiter held static at 32 (the baseline). Prints, for each, the
requests, the share answered 429, failed invocations and wall time, and the ratios.

``--kit`` runs the kit's ``evaluate`` (which opens a client per call, about 50 ms of CPU
each on a small machine, so the client's own pace hides much of the server's limit); the
default is a step that calls one shared ``OpenAIChatAPI`` with ``generate_with_retries``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from typing import Annotated, Any

from fxtr import Array, ArrayHandle, StepContext, WorkflowContext, launch, step, workflow
from fxtr.evals import Case, Model, evaluate, includes
from fxtr.models import (
    ContentText,
    ModelCallError,
    ModelCallFailure,
    ModelRequest,
    OpenAIChatAPI,
    UserMessage,
    _limiter,
    generate_with_retries,
    set_price,
)
from tests.loopback import CapacityServer

API: dict[str, Any] = {}


@step(name="bench.ask")
async def ask(context: StepContext, case: str) -> str:
    request = ModelRequest(context=(UserMessage(content=(ContentText(text=case),)),))
    result = await generate_with_retries(API["api"], request)
    if isinstance(result, ModelCallFailure):
        raise ModelCallError(result)
    return result.text


@workflow(name="bench.asks")
async def asks(
    context: WorkflowContext, case: Annotated[ArrayHandle[str], "[case: str]"]
) -> Annotated[ArrayHandle[str], "[case: str]"]:
    return context.run_step("ask", ask, {"case": case}, map_over=["case"])


async def _one(
    adapt: bool, cases: int, capacity: int, latency: float, kit: bool
) -> dict[str, float]:
    store = tempfile.mkdtemp(prefix="fxtr-bench-limiter-")
    token = _limiter.adaptive.set(adapt)
    try:
        with CapacityServer(capacity=capacity, latency=latency) as server:
            start = time.perf_counter()
            if kit:
                model = Model("openai-compatible/bench-m", base_url=server.url)
                data = {f"c{i}": Case(id=f"c{i}", input=f"q{i}") for i in range(cases)}
                inputs: dict[str, Any] = {
                    "model": Array.from_mapping({model.name: model}, dims=["model"]),
                    "case": Array.from_mapping(data, dims=["case"]),
                    "scorer": includes(),
                }
                job = await launch(evaluate, inputs, store=store, concurrency=32, verify=False)
            else:
                API["api"] = OpenAIChatAPI("bench-m", base_url=server.url)
                questions = {f"c{i}": f"q{i}" for i in range(cases)}
                job = await launch(
                    asks,
                    {"case": Array.from_mapping(questions, dims=["case"])},
                    store=store,
                    concurrency=32,
                    verify=False,
                )
                await API.pop("api").aclose()
            wall = time.perf_counter() - start
    finally:
        _limiter.adaptive.reset(token)
        shutil.rmtree(store, ignore_errors=True)
    return {
        "requests": server.requests,
        "rejected": server.rejected,
        "failed": sum(i.status == "failed" for i in job.invocations),
        "wall": wall,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--kit", action="store_true", help="run the kit's evaluate")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-loopback")
    set_price("bench-m", input=1.0, output=1.0)
    static = await _one(False, args.cases, args.capacity, args.latency, args.kit)
    adaptive = await _one(True, args.cases, args.capacity, args.latency, args.kit)
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
