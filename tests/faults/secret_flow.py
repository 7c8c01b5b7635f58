"""A step that calls a fake provider (a loopback server that echoes the key it was sent)."""

from __future__ import annotations

import os
from typing import Annotated

import httpx

from fxtr.experiment.handles import ArrayHandle, ScalarHandle
from fxtr.experiment.steps import StepContext, step
from fxtr.experiment.workflows import WorkflowContext, workflow


@step(name="faults.call_provider")
async def call_provider(context: StepContext, case: str, url: str) -> str:
    """Send the key as a provider client does; return, log, or raise what comes back."""
    key = os.environ["OPENAI_API_KEY"]
    async with httpx.AsyncClient() as client:
        reply = await client.post(url, headers={"Authorization": f"Bearer {key}"}, json={"q": case})
    text = reply.text
    context.log(f"provider said {text}")
    if case == "boom":
        raise RuntimeError(f"provider refused: {text}")
    return text


@workflow(name="faults.secrets")
async def secrets_flow(
    context: WorkflowContext,
    cases: Annotated[ArrayHandle[str], "[case: str]"],
    url: ScalarHandle[str],
) -> Annotated[ArrayHandle[str], "[case: str]"]:
    return context.run_step("call", call_provider, {"case": cases, "url": url}, map_over=["case"])
