"""A provider outage on one case: the summary shows the reason, `--fxtr-resume` reruns it.

Try it:

    FXTR_DEMO_OUTAGE=1 pytest evals/test_outage.py   # one case fails: budget (HTTP 429)
    pytest evals/test_outage.py --fxtr-resume        # only that case's step runs again

The outage is read here, in the launcher, like any provider state a step cannot see; the
step itself stays hermetic.
"""

from __future__ import annotations

import os
from typing import Annotated

import pytest
from evalkit import PROVIDER, ask, model_api, scripted_answer

from fxtr import ArrayHandle, ScalarHandle, StepContext, WorkflowContext, step, workflow
from fxtr.models import (
    DEFAULT_FAILURE_CATEGORIES_TO_RETRY,
    ModelCallError,
    ModelCallFailure,
    RetryConfig,
    generate_with_retries,
)

OUTAGE = os.environ.get("FXTR_DEMO_OUTAGE") == "1"


def _reply(request):
    text = request.context[-1].content[0].text
    if OUTAGE and "planet" in text:
        return ModelCallFailure(
            category="rate_limit",
            description="HTTP 429: rate limit reached",
            status_code=429,
            retry_after=0.01,
        )
    return scripted_answer("gpt-4o")(request)


@step(name="outage.answer")
async def answer(context: StepContext, question: str, expected: str, provider: str) -> bool:
    """Whether the model's answer contains the expected one (retrying rate limits twice)."""
    api = model_api("gpt-4o", reply=_reply)
    try:
        response = await generate_with_retries(
            api,
            ask(question),
            retry=RetryConfig(max_attempts=2, initial_delay=0.01),
            failure_categories_to_retry=DEFAULT_FAILURE_CATEGORIES_TO_RETRY,
        )
    finally:
        await api.aclose()
    if isinstance(response, ModelCallFailure):
        raise ModelCallError(response)
    return expected.lower() in response.text.lower()


@workflow(name="outage.evaluate")
async def evaluate(
    context: WorkflowContext,
    question: Annotated[ArrayHandle[str], "[case: str]"],
    expected: Annotated[ArrayHandle[str], "[case: str]"],
    provider: ScalarHandle[str],
) -> Annotated[ArrayHandle[bool], "[case: str]"]:
    return context.run_step(
        "answer",
        answer,
        {"question": question, "expected": expected, "provider": provider},
        map_over=["case"],
    )


@pytest.mark.fxtr(evaluate, inputs={"provider": PROVIDER}, threshold=1.0)
@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is the capital of France?", "Paris"),
        ("What is the largest planet?", "Jupiter"),
        ("What is 2 + 2?", "4"),
    ],
    ids=["france", "planet", "arithmetic"],
)
def test_answers(question, expected, result):
    assert result is True
