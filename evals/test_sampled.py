"""Sampled answers: each case is asked five times, so flaky cases and pass@k show.

The offline model answers each sample from a seed (the sample index arrives as
`request.sampling.seed`), so its answers vary by sample and are the same on every run. Each
sample has its own address: raising `samples` (or `--fxtr-samples 10`) runs only the new ones.
"""

from __future__ import annotations

import random

import pytest

from fxtr.evals import evaluate, load_cases, match, register_mock, user_text

CASES = load_cases("data/capitals.jsonl")
SKILL = {"france": 1.0, "japan": 1.0, "australia": 0.3, "brazil": 0.6, "turkey": 0.7}
"""How often the model knows each capital; the others it always knows."""


def unsteady(request) -> str:
    question = user_text(request)
    case = next(c for c in CASES if c.input == question)
    draw = random.Random(f"{case.id}/{request.sampling.seed}").random()  # same every run
    knows = draw < SKILL.get(case.id, 1.0)
    return f"I believe it is {case.target if knows else 'Springfield'}."


MODEL = register_mock("gpt-5-nano", unsteady)


@pytest.mark.fxtr(
    evaluate,
    dims={"model": "model", "case": "case"},
    inputs={"scorer": match(location="end"), "samples": 5},
    threshold=0.7,
)
@pytest.mark.parametrize("model", [MODEL])
@pytest.mark.parametrize("case", CASES)
def test_sampled(model, case, result):
    """An item passes when one of its samples is right (pass@5); the mean is gated."""
    assert any(score.value == 1.0 for _, score in result.items())
