"""Your own step in a workflow of your own, next to the kit's `generate`: are answers brief?"""

from __future__ import annotations

from typing import Annotated

import pytest

from fxtr import ArrayHandle, BoundID, StepContext, WorkflowContext, step, workflow
from fxtr.evals import Case, Model, generate, load_cases, register_mock, user_text
from fxtr.models import ModelResponse

CASES = load_cases("data/qa.jsonl")
TERSE = register_mock("terse", lambda r: user_text(r).split()[-1], price_as="gpt-5-nano")


@step(name="brief.words")
async def words(context: StepContext, response: ModelResponse) -> int:
    """How many words the answer has."""
    return len(response.text.split())


@workflow(name="brief.evaluate")
async def evaluate(
    context: WorkflowContext,
    model: Annotated[ArrayHandle[BoundID[Model]], "[model: str]"],
    case: Annotated[ArrayHandle[BoundID[Case]], "[case: str]"],
) -> Annotated[ArrayHandle[int], "[model: str, case: str]"]:
    answers = context.run_step(
        "answer", generate, {"model": model, "case": case}, map_over=["model", "case"]
    )
    return context.run_step("words", words, {"response": answers}, map_over=["model", "case"])


@pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"})
@pytest.mark.parametrize("model", [TERSE])
@pytest.mark.parametrize("case", CASES)
def test_brief(model, case, result):
    assert result <= 12
