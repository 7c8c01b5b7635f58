"""A provider outage on one case: the summary shows the reason, `--fxtr-resume` reruns it.

Try it:

    FXTR_DEMO_OUTAGE=1 pytest evals/test_outage.py   # one case fails: budget (HTTP 429)
    pytest evals/test_outage.py --fxtr-resume        # only that case's steps run again

The outage is read here, in the launcher, like any provider state a step cannot see; the
steps themselves stay hermetic.
"""

from __future__ import annotations

import os

import pytest

from fxtr.evals import evaluate, includes, load_cases, register_mock, user_text
from fxtr.models import ModelCallFailure

OUTAGE = os.environ.get("FXTR_DEMO_OUTAGE") == "1"
CASES = [c for c in load_cases("data/qa.jsonl") if c.id in ("france", "planet", "arithmetic")]
ANSWERS = {"France": "Paris.", "planet": "Jupiter.", "2 + 2": "4"}


def reply(request):
    question = user_text(request)
    if OUTAGE and "planet" in question:
        return ModelCallFailure(
            category="quota",
            description="HTTP 429: You exceeded your current quota.",
            status_code=429,
        )
    return next(answer for topic, answer in ANSWERS.items() if topic in question)


MODEL = register_mock("outage-model", reply, price_as="gpt-5-mini")


@pytest.mark.fxtr(
    evaluate,
    dims={"model": "model", "case": "case"},
    inputs={"scorer": includes()},
    threshold=1.0,
)
@pytest.mark.parametrize("model", [MODEL])
@pytest.mark.parametrize("case", CASES)
def test_answers(model, case, result):
    (score,) = (score for _, score in result.items())
    assert score.value == 1.0
