"""Workflows and steps the fault tests run, in this process or in a subprocess (driver.py).

Steps take their behaviour from their inputs (``payload``, ``gate``) so that two processes can
be told apart by their inputs alone, which is what a conflict at one address needs.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated, Any

from fxtr.experiment.handles import ArrayHandle, ScalarHandle
from fxtr.experiment.steps import StepContext, step
from fxtr.experiment.workflows import WorkflowContext, workflow

SURROGATE = "bad \ud800 value"


def _flag(key: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in key)


async def _wait_gate(gate: str, key: str) -> None:
    """Say this invocation started, then wait until the test opens the gate (a file)."""
    Path(gate, "started-" + _flag(key)).touch()
    while not Path(gate, "go").exists():
        await asyncio.sleep(0.005)


@step(name="faults.work")
async def work(context: StepContext, key: str, payload: str, gate: str) -> Any:
    """Return ``payload:key``; misbehave where ``payload`` says so."""
    if gate:
        await _wait_gate(gate, key)
    kind, _, target = payload.partition("@")
    if kind in ("big", "huge"):  # results complete (and are stored) a few at a time
        await asyncio.sleep(0.02)
    if target and target != key:
        return f"{kind}:{key}"
    if kind == "surrogate":
        return SURROGATE
    if kind == "cancel":
        raise asyncio.CancelledError("the step cancelled itself")
    if kind == "keyboard":
        raise KeyboardInterrupt("the step raised KeyboardInterrupt")
    if kind == "exit":
        raise SystemExit(3)
    if kind == "bigint":
        return 10**5000
    if kind == "deep":
        value: Any = 1
        for _ in range(900):
            value = [value]
        return value
    if kind == "big":  # 60 kB: diskcache keeps it in a file beside cache.db
        return f"big:{key}:" + "x" * 60_000
    if kind == "huge":
        return f"huge:{key}:" + "x" * 300_000
    if kind == "block":
        time.sleep(1.5)
    if kind == "fail":
        raise RuntimeError(f"failed on purpose for key {key}")
    return f"{kind}:{key}"


@workflow(name="faults.batch")
async def batch(
    context: WorkflowContext,
    keys: Annotated[ArrayHandle[str], "[case: str]"],
    payload: ScalarHandle[str],
    gate: ScalarHandle[str],
) -> Annotated[ArrayHandle[Any], "[case: str]"]:
    """One ``work`` invocation per key."""
    return context.run_step(
        "work", work, {"key": keys, "payload": payload, "gate": gate}, map_over=["case"]
    )


@step(name="faults.echo")
async def echo(context: StepContext, value: Any) -> str:
    return repr(type(value))


@workflow(name="faults.anything")
async def anything(context: WorkflowContext, value: ScalarHandle[Any]) -> ScalarHandle[str]:
    """A workflow whose one input has any type (hostile inputs go here)."""
    return context.run_step("echo", echo, {"value": value})


@workflow(name="faults.mapstr")
async def mapstr(
    context: WorkflowContext, keys: Annotated[ArrayHandle[str], "[model: str]"]
) -> Annotated[ArrayHandle[Any], "[model: str]"]:
    """``map_over`` given as a bare string (a common slip)."""
    return context.run_step(
        "work", work, {"key": keys, "payload": "ok", "gate": ""}, map_over="model"  # type: ignore[arg-type]
    )
