"""The kit in fifteen lines: a dataset, two models, a judge, samples and a gate (offline)."""

import pytest

from fxtr.evals import evaluate, load_cases, mock_judge, model_graded_fact, register_mock, user_text

CASES = load_cases("evals/data/capitals.jsonl")
KNOWN = {case.input: f"The capital is {case.target}." for case in CASES}
MODELS = [  # offline stand-ins: Model("openai/gpt-5-mini") calls the real one
    register_mock("gpt-5-mini", lambda request: KNOWN[user_text(request)]),
    register_mock("claude-haiku-4-5", lambda r: KNOWN[user_text(r)].replace("Canberra", "Sydney")),
]


@pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"}, threshold=0.8,
                  inputs={"scorer": model_graded_fact(mock_judge()), "samples": 3})
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("case", CASES)
def test_capitals(model, case, result):
    assert len(result.keys("sample")) == 3
