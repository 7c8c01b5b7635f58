"""Judges you can trust (offline): a gold set corrects the pass rate, K verdicts, both orders.

The mock judge here is swayed the way real ones are: a confident wrong answer often passes,
a hedged right one often fails, and each call draws its own verdict (a seed per judge
sample). Its gold set (`data/judge_gold.jsonl`: completions with the right verdict) measures
its specificity q0 and sensitivity q1; the report then gives each model's pass rate
corrected for them (Rogan-Gladen), and the gate uses the corrected value. The pairwise eval
shows a judge that prefers whichever answer it reads first: the verdicts that change with the
order are ties, and the report gives the position-inconsistency rate.
"""

from __future__ import annotations

import random
import re

import pytest

from fxtr.evals import evaluate, load_cases, model_graded_qa, pairwise, register_mock, user_text

CASES = load_cases("data/capitals.jsonl")
GOLD = load_cases("data/judge_gold.jsonl")  # input, target, completion, label (1 or 0)
RIGHT = {case.input: case.target for case in CASES}


def _field(prompt: str, name: str) -> str:
    found = re.search(rf"\[{name}\]: (.*?)\n\*\*\*", prompt, re.DOTALL)
    return found.group(1).strip() if found else ""


def swayed_judge(request) -> str:
    """GRADE C when the answer has the criterion, except that it is swayed by the tone."""
    prompt = user_text(request)
    answer, criterion = _field(prompt, "Submission"), _field(prompt, "Criterion")
    draw = random.Random(f"{answer}/{request.sampling.seed}").random()  # one draw per call
    if "definitely" in answer.lower():
        right = draw < 0.6  # confidence sells: 60% of confident answers pass
    elif "not sure" in answer.lower():
        right = criterion.lower() in answer.lower() and draw < 0.5  # hedging costs
    else:
        right = criterion.lower() in answer.lower()
    return f"I compared the submission with the criterion.\nGRADE: {'C' if right else 'I'}"


def hedger(request) -> str:
    """Always right, but hedges on every other question."""
    question = user_text(request)
    target = RIGHT[question]
    return f"I think it might be {target}, but I am not sure." if len(question) % 2 else target


def bluffer(request) -> str:
    """Confident, and wrong on Australia and Brazil."""
    target = RIGHT[user_text(request)]
    return f"Definitely { {'Canberra': 'Sydney', 'Brasilia': 'Rio'}.get(target, target)}."


JUDGE = register_mock("swayed-judge", swayed_judge)
MODELS = [register_mock("hedger", hedger), register_mock("bluffer", bluffer)]


@pytest.mark.fxtr(
    evaluate,
    dims={"model": "model", "case": "case"},
    inputs={"scorer": model_graded_qa(JUDGE, calibration=GOLD, judge_samples=3)},
    threshold=0.5,
)
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("case", CASES)
def test_calibrated_judge(model, case, result):
    """Each answer is graded three times; its score is the majority verdict."""
    (score,) = result.values()
    assert score.value in (0.0, 1.0)


def first_read(request) -> str:
    """A pairwise judge that prefers the answer with the target, and else the first it reads."""
    prompt = user_text(request)
    target = _field(prompt, "Criterion").lower()
    a, b = _field(prompt, "Answer A").lower(), _field(prompt, "Answer B").lower()
    if (target in a) != (target in b):
        return f"Only one answer names {target}.\nGRADE: {'A' if target in a else 'B'}"
    return "Both answers look alike; the first one reads better.\nGRADE: A"


REFERENCE = register_mock("reference", lambda request: f"It is {RIGHT[user_text(request)]}.")


@pytest.mark.fxtr(
    evaluate,
    dims={"model": "model", "case": "case"},
    inputs={"scorer": pairwise(register_mock("first-read-judge", first_read), against=REFERENCE)},
)
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("case", CASES)
def test_pairwise_judge(model, case, result):
    """1 win, 0.5 tie, 0 loss against the reference; an order-dependent verdict is a tie."""
    (score,) = result.values()
    assert score.value in (0.0, 0.5, 1.0)
