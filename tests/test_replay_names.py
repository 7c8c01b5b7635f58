"""Determinism by name (DESIGN §1): replayed operations are matched with the record by name,
never by position; and errors at scheduling time come before any work starts."""

from __future__ import annotations

import asyncio
from typing import Annotated

import pytest

from fxtr import (
    Array,
    ArrayHandle,
    DeterminismError,
    ScalarHandle,
    SignatureError,
    StepContext,
    WorkflowContext,
    run,
    step,
    workflow,
)

RAN: list[str] = []
FLIP = {"n": 0}


@step(name="names.wait")
async def wait(context: StepContext, seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


@step(name="names.echo")
async def echo(context: StepContext, x: float) -> float:
    RAN.append(context.cache_key)
    return x


async def _branch(context: WorkflowContext, name: str, seconds: float) -> ScalarHandle[float]:
    waited = await context.run_step(f"wait_{name}", wait, {"seconds": seconds}).item()
    return context.run_step(f"after_{name}", echo, {"x": waited})


@workflow(name="names.gathered")
async def gathered(context: WorkflowContext) -> Annotated[ArrayHandle[float], "[branch: str]"]:
    # the slow branch schedules its second step last in a live run and, served from the
    # record at once, may schedule it first on replay: the same names in another order
    slow, fast = await asyncio.gather(_branch(context, "slow", 0.3), _branch(context, "fast", 0))
    return context.stack({"slow": slow, "fast": fast}, dim="branch")


def test_concurrent_branches_schedule_in_any_order_and_still_verify():
    """A body scheduling from asyncio.gather verifies in every run (5 of 5 failed before)."""
    for _ in range(5):
        result = run(gathered, {}, store=".fxtr-gathered", conflict="overwrite")
        assert result.status == "succeeded", result.invocations
        assert result.output.to_dict() == {"slow": 0.3, "fast": 0.0}


@workflow(name="names.flipped")
async def flipped(
    context: WorkflowContext, x: ScalarHandle[float]
) -> Annotated[ArrayHandle[float], "[name: str]"]:
    FLIP["n"] += 1
    names = ["a", "b", "c"] if FLIP["n"] % 2 else ["c", "a", "b"]
    handles = {n: context.run_step(n, echo, {"x": x}) for n in names}
    return context.stack(handles, dim="name")


def test_the_same_names_in_another_order_replay():
    """Scheduling order differs between the attempt and its verifying replay: still fine."""
    FLIP["n"] = 0
    result = run(flipped, {"x": 1.0})
    assert result.status == "succeeded"
    assert FLIP["n"] == 2  # the attempt and the replay, in different orders


@workflow(name="names.other_input")
async def other_input(context: WorkflowContext) -> Annotated[ArrayHandle[float], "[name: str]"]:
    FLIP["n"] += 1
    a = context.run_step("a", echo, {"x": 1.0})
    b = context.run_step("b", echo, {"x": float(FLIP["n"])})  # differs on replay
    return context.stack({"a": a, "b": b}, dim="name")


def test_a_name_scheduled_with_other_inputs_is_still_caught():
    FLIP["n"] = 0
    with pytest.raises(DeterminismError) as info:
        run(other_input, {})
    msg = str(info.value)
    assert "the operation named 'b'" in msg and "Differences: inputs: recorded" in msg


@workflow(name="names.missing")
async def missing(context: WorkflowContext) -> Annotated[ArrayHandle[float], "[name: str]"]:
    FLIP["n"] += 1
    handles = {"a": context.run_step("a", echo, {"x": 1.0})}
    if FLIP["n"] == 1:
        handles["b"] = context.run_step("b", echo, {"x": 2.0})
    return context.stack(handles, dim="name")


def test_a_name_the_replay_leaves_out_is_caught():
    FLIP["n"] = 0
    with pytest.raises(DeterminismError, match=r"missing: 'b' \(step names.echo\)"):
        run(missing, {})


@workflow(name="names.bad_late")
async def bad_late(
    context: WorkflowContext, xs: Annotated[ArrayHandle[float], "[i: int]"]
) -> ScalarHandle[float]:
    for n in range(20):
        context.run_step(f"ok_{n}", echo, {"x": float(n)})
    # a scalar step mapped over nothing, given an array with a dimension: refused
    return context.run_step("bad", echo, {"x": xs})


def test_an_error_at_scheduling_time_runs_nothing_scheduled_before_it():
    """20 steps scheduled before a SignatureError never start (all 20 ran before)."""
    RAN.clear()
    xs = Array.from_mapping({0: 1.0, 1: 2.0}, dims=["i"], value_type=float)
    with pytest.raises(SignatureError, match="'bad'"):
        run(bad_late, {"xs": xs})
    assert RAN == []


@workflow(name="names.after_await")
async def after_await(
    context: WorkflowContext, xs: Annotated[ArrayHandle[float], "[i: int]"]
) -> ScalarHandle[float]:
    first = context.run_step("first", echo, {"x": 1.0})
    await first.item()  # the body suspends: what it scheduled so far starts
    return context.run_step("bad", echo, {"x": xs})


def test_work_scheduled_before_the_body_suspends_does_start():
    RAN.clear()
    xs = Array.from_mapping({0: 1.0}, dims=["i"], value_type=float)
    with pytest.raises(SignatureError):
        run(after_await, {"xs": xs})
    assert RAN == ["names.after_await/first"]
