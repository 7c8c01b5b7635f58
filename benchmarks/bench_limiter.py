"""Adaptive concurrency against static limits, in the same run (DESIGN §14, issue 37 item 11).

A loopback OpenAI-compatible server on 127.0.0.1 admits ``--capacity`` requests at once
(8) and answers 429 beyond, each admitted request taking ``--latency`` seconds. The same
job (``--cases`` calls, each a step calling one shared ``OpenAIChatAPI`` through
``generate_with_retries``) runs with the limiter held static at 8, 16 and 32, and with the
adaptive limiter starting at 32. Prints, for each, the requests, the share answered 429,
failed invocations and wall time; then the adaptive run's 429 share and its time against the
best static limit (targets: under 15% and within 1.2x).
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


@step(name="bench.limiter.ask")
async def ask(context: StepContext, case: str) -> str:
    request = ModelRequest(context=(UserMessage(content=(ContentText(text=case),)),))
    result = await generate_with_retries(API["api"], request)
    if isinstance(result, ModelCallFailure):
        raise ModelCallError(result)
    return result.text


@workflow(name="bench.limiter.asks")
async def asks(
    context: WorkflowContext, case: Annotated[ArrayHandle[str], "[case: str]"]
) -> Annotated[ArrayHandle[str], "[case: str]"]:
    return context.run_step("ask", ask, {"case": case}, map_over=["case"])


async def run_once(
    limit: int, adapt: bool, cases: int, capacity: int, latency: float, kit: bool = False
) -> dict[str, float]:
    """One job against a fresh server; its requests, 429s, failures and wall time."""
    store = tempfile.mkdtemp(prefix="fxtr-bench-limiter-")
    tokens = (_limiter.adaptive.set(adapt), _limiter.start_limit.set(limit))
    try:
        with CapacityServer(capacity=capacity, latency=latency) as server:
            API["api"] = OpenAIChatAPI("bench-limiter-m", base_url=server.url)
            questions = {f"c{i}": f"q{i}" for i in range(cases)}
            inputs: dict[str, Any] = {"case": Array.from_mapping(questions, dims=["case"])}
            workflow: Any = asks
            if kit:  # the kit's evaluate: a model API per call, as evals make them
                model = Model("openai-compatible/bench-limiter-m", base_url=server.url)
                workflow = evaluate
                data = {f"c{i}": Case(id=f"c{i}", input=f"q{i}", target="ok") for i in range(cases)}
                inputs = {
                    "model": Array.from_mapping({model.name: model}, dims=["model"]),
                    "case": Array.from_mapping(data, dims=["case"]),
                    "scorer": includes(),
                }
            start = time.perf_counter()
            job = await launch(
                workflow, inputs, store=store, concurrency=max(32, limit), verify=False
            )
            wall = time.perf_counter() - start
            await API.pop("api").aclose()
    finally:
        _limiter.adaptive.reset(tokens[0])
        _limiter.start_limit.reset(tokens[1])
        shutil.rmtree(store, ignore_errors=True)
    return {
        "requests": server.requests,
        "rejected": server.rejected,
        "failed": sum(i.status == "failed" for i in job.invocations),
        "wall": wall,
        "peak": server.peak,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=1, help="repeat everything N times")
    parser.add_argument("--kit", action="store_true", help="run the kit's evaluate")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-loopback")
    set_price("bench-limiter-m", input=1.0, output=1.0)
    runs = [("static 8", 8, False), ("static 16", 16, False)]
    runs += [("static 32", 32, False), ("adaptive 32", 32, True)]
    for _ in range(args.rounds):
        results = {}
        for name, limit, adapt in runs:
            r = await run_once(limit, adapt, args.cases, args.capacity, args.latency, args.kit)
            results[name] = r
            print(
                f"{name:>12}: {r['requests']:.0f} requests, {r['rejected']:.0f} answered 429 "
                f"({r['rejected'] / r['requests']:.1%}), {r['failed']:.0f} failed, "
                f"{r['wall']:.2f} s"
            )
        best = min(
            (r for n, r in results.items() if n.startswith("static")), key=lambda r: r["wall"]
        )
        a = results["adaptive 32"]
        share = a["rejected"] / a["requests"]
        ratio = a["wall"] / best["wall"]
        met = share < 0.15 and ratio <= 1.2 and not a["failed"]
        print(
            f"adaptive: {share:.1%} of requests answered 429, wall time x{ratio:.2f} of the best "
            f"static limit (targets: under 15% and within 1.2x: {'met' if met else 'NOT met'})"
        )


if __name__ == "__main__":
    asyncio.run(main())
