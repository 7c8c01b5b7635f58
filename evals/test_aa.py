"""The A/A control (offline): two models drawn from one distribution, six samples a case.

Both mock models answer each case correctly with the same per-case probability (a draw per
model, case and sample), so any difference between them is noise. After `pytest evals/`,
`fxtr calibrate latest` splits each case's six samples into two halves 200 times and compares
the halves as `--fxtr-baseline` compares runs: the share of splits that do not say "no
significant change" is the gate's false-flip rate, which should sit near alpha = 0.05. It
also prints the variance between and within cases and the minimum detectable effect.
"""

from __future__ import annotations

import random

import pytest

from fxtr.evals import Case, evaluate, includes, register_mock, user_text

CASES = [Case(id=f"q{i:02d}", input=f"Question {i}: is it so?", target="yes") for i in range(40)]
SKILL = {case.input: random.Random(case.id).random() for case in CASES}
"""How often either model gets each case right: the same for both."""


def coin(name: str):
    def reply(request) -> str:
        question = user_text(request)
        draw = random.Random(f"{name}/{question}/{request.sampling.seed}").random()
        return "yes" if draw < SKILL[question] else "no"

    return reply


MODELS = [register_mock("twin-a", coin("twin-a")), register_mock("twin-b", coin("twin-b"))]


@pytest.mark.fxtr(
    evaluate,
    dims={"model": "model", "case": "case"},
    inputs={"scorer": includes(), "samples": 6},
)
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("case", CASES)
def test_twins(model, case, result):
    assert len(result.keys("sample")) == 6
