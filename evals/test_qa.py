"""QA on the kit: two models answer a dataset, a judge grades, the mean per model gates CI.

Offline (the default) the models and the judge are `mock/...` stand-ins; with OPENAI_API_KEY
and ANTHROPIC_API_KEY set, the same eval calls the real models. The model's name is its
identity in every fingerprint, so offline answers are never served for a real model.
"""

from __future__ import annotations

import os

import pytest

from fxtr.evals import (
    Model,
    evaluate,
    load_cases,
    mock_judge,
    model_graded_fact,
    register_mock,
    user_text,
)
from fxtr.models import Sampling

CASES = load_cases("data/qa.jsonl")  # found from this module's folder

KNOWLEDGE = {
    "capital of France": "The capital of France is Paris.",
    "2 + 2": "2 + 2 = 4.",
    "largest planet": "Jupiter is the largest planet in the solar system.",
    "Hamlet": "Hamlet was written by William Shakespeare.",
    "boiling point": "Water boils at 100 degrees Celsius at sea level.",
}


def offline(gaps: set[str]):
    """A mock model's reply: what it knows, except its gaps."""

    def reply(request) -> str:
        question = user_text(request)
        topic = next((t for t in KNOWLEDGE if t in question), None)
        return "I am not sure." if topic is None or topic in gaps else KNOWLEDGE[topic]

    return reply


if os.environ.get("OPENAI_API_KEY") and os.environ.get("ANTHROPIC_API_KEY"):
    SAMPLING = Sampling(max_tokens=200)
    MODELS = [
        Model("openai/gpt-5-mini", sampling=SAMPLING),
        Model("anthropic/claude-haiku-4-5", sampling=SAMPLING),
    ]
    JUDGE = Model("openai/gpt-5")
else:
    MODELS = [
        register_mock("qa-large", offline(gaps=set()), price_as="gpt-5-mini"),
        register_mock("qa-small", offline(gaps={"Hamlet"}), price_as="claude-haiku-4-5"),
    ]
    JUDGE = mock_judge("qa-judge", price_as="gpt-5")


@pytest.mark.fxtr(
    evaluate,
    dims={"model": "model", "case": "case"},
    inputs={"scorer": model_graded_fact(JUDGE)},
    threshold=0.7,
)
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("case", CASES)
def test_qa(model, case, result):
    """Each answer is graded; the per-model mean must reach the threshold."""
    (score,) = (score for _, score in result.items())
    assert score.explanation  # the judge's reply, kept with the score
