"""A step that runs a small agent with a `fxtr.tracing.Client`: its model calls and its own
sub-steps are recorded, and their tokens and cost count toward the step's invocation.

The analyst is a `fxtr.evals.Model` input (offline, `mock/analyst`), so its name is part
of the step's fingerprint.
"""

from __future__ import annotations

from typing import Annotated

import pytest

from fxtr import ArrayHandle, BoundID, ScalarHandle, StepContext, WorkflowContext, step, workflow
from fxtr.evals import Model, register_mock, user_text
from fxtr.tracing import Client


def _analyst(request):
    if "competitors" in user_text(request):
        return "Acme, Globex, Initech"
    return "Acme leads on price; Globex on features; Initech on support."


ANALYST = register_mock("analyst", _analyst, price_as="gpt-5-mini")


def lookup_prices(names: list[str]) -> dict[str, int]:
    """A deterministic stand-in for a pricing tool."""
    return {name: 10 * (i + 1) for i, name in enumerate(names)}


@step(name="research.brief")
async def brief(context: StepContext, market: str, analyst: Model) -> dict:
    client = Client({"analyst": analyst.api()})
    with client.task(f"research {market}"):
        found = await client.messages.create(
            messages=[{"role": "user", "content": f"Who are the top 3 competitors in {market}?"}]
        )
        names = [n.strip() for n in found.text.split(",")]
        prices = client.step("fetch-pricing", lookup_prices, names)
        summary = await client.messages.create(
            messages=[{"role": "user", "content": f"Compare {names} at prices {prices}."}]
        )
    return {"competitors": names, "prices": prices, "summary": summary.text}


@step(name="research.score")
async def score(context: StepContext, brief: dict) -> float:
    """1.0 for a brief with three competitors, all priced, and a summary."""
    ok = len(brief["competitors"]) == 3 and len(brief["prices"]) == 3 and bool(brief["summary"])
    return 1.0 if ok else 0.0


@workflow(name="research.evaluate")
async def evaluate(
    context: WorkflowContext,
    market: Annotated[ArrayHandle[str], "[case: str]"],
    analyst: ScalarHandle[BoundID[Model]],
) -> Annotated[ArrayHandle[float], "[case: str]"]:
    briefs = context.run_step(
        "brief", brief, {"market": market, "analyst": analyst}, map_over=["case"]
    )
    return context.run_step("score", score, {"brief": briefs}, map_over=["case"])


@pytest.mark.fxtr(evaluate, inputs={"analyst": ANALYST}, threshold=1.0)
@pytest.mark.parametrize("market", ["databases", "observability"])
def test_research(market, result):
    assert result == 1.0
