"""A baseline comparison to catch (README walk-through step 6).

A scripted model answers three samples per case; ``FXTR_DEMO_WORSE=1`` makes ``large`` forget a
third of its answers (a regression) and moves two of ``small``'s cases (no significant change).
"""

import os
from typing import Annotated

import pytest

from fxtr import ArrayHandle, ScalarHandle, StepContext, WorkflowContext, step, workflow

CASES = [f"q{i:02d}" for i in range(30)]


@step(name="demo.answer")
async def answer(context: StepContext, model: str, case: str, worse: bool) -> bool:
    """Right or wrong, seeded by (model, case, sample): 'large' forgets a third when worse."""
    i = int(case[1:])
    if model == "small":
        shift = 2 if worse and i in (4, 9) else 0  # two cases move a little
        return (i * 7 + (context.sample or 0) + shift) % 10 < 7  # about 70%, some flaky
    return not (worse and i % 3 == 0)


@workflow(name="demo.evaluate")
async def evaluate(
    context: WorkflowContext,
    model: Annotated[ArrayHandle[str], "[model: str]"],
    case: Annotated[ArrayHandle[str], "[case: str]"],
    worse: ScalarHandle[bool],
    samples: int = 1,
) -> Annotated[ArrayHandle[bool], "[model: str, case: str, sample: int]"]:
    return context.run_step(
        "answer", answer, {"model": model, "case": case, "worse": worse},
        map_over=["model", "case"], samples=samples,
    )


@pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"}, threshold=0.6,
                  inputs={"worse": os.environ.get("FXTR_DEMO_WORSE") == "1", "samples": 3})
@pytest.mark.parametrize("model", ["small", "large"])
@pytest.mark.parametrize("case", CASES)
def test_baseline_demo(model, case, result):
    assert result is not None
