"""A step whose result is large enough for diskcache to keep it in a file beside cache.db."""

from __future__ import annotations

from typing import Annotated

from fxtr.experiment.handles import ArrayHandle
from fxtr.experiment.steps import StepContext, step
from fxtr.experiment.workflows import WorkflowContext, workflow

CALLS: list[str] = []


@step(name="faults.big")
async def big(context: StepContext, key: str) -> str:
    """A 100 kB result (diskcache's files start at 32 kB)."""
    CALLS.append(key)
    return key + ":" + "x" * 100_000


@workflow(name="faults.bigs")
async def bigs(
    context: WorkflowContext, keys: Annotated[ArrayHandle[str], "[case: str]"]
) -> Annotated[ArrayHandle[str], "[case: str]"]:
    return context.run_step("big", big, {"key": keys}, map_over=["case"])
