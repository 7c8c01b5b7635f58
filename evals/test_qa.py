"""QA over models x cases, graded by a judge model; the mean score per model gates CI."""

from __future__ import annotations

from typing import Annotated

import pytest
from evalkit import PROVIDER, ask, model_api, scripted_judge

from fxtr import (
    ArrayHandle,
    BoundID,
    Entity,
    ScalarHandle,
    StepContext,
    WorkflowContext,
    step,
    workflow,
)


class Judge(Entity):
    """The grading model and its instructions."""

    model_name: str
    rubric: str


@step(name="qa.answer")
async def answer(context: StepContext, model: str, question: str, provider: str) -> str:
    """Ask one model one question."""
    api = model_api(model)
    try:
        response = await api.generate(ask(question))
    finally:
        await api.aclose()
    return response.text


@step(name="qa.judge")
async def grade_answer(
    context: StepContext, judge: Judge, question: str, expected: str, answer: str, provider: str
) -> float:
    """1.0 when the judge says the answer matches the expected one, else 0.0."""
    api = model_api(judge.model_name, reply=scripted_judge)
    prompt = f"{judge.rubric}\nQuestion: {question}\nExpected answer: {expected}\nAnswer: {answer}"
    try:
        verdict = (await api.generate(ask(prompt))).text
    finally:
        await api.aclose()
    context.log(f"judge said {verdict!r}")
    return 1.0 if verdict.strip().upper().startswith("YES") else 0.0


@workflow(name="qa.evaluate")
async def evaluate(
    context: WorkflowContext,
    model: Annotated[ArrayHandle[str], "[model: str]"],
    question: Annotated[ArrayHandle[str], "[case: str]"],
    expected: Annotated[ArrayHandle[str], "[case: str]"],
    judge: ScalarHandle[BoundID[Judge]],
    provider: ScalarHandle[str],
) -> Annotated[ArrayHandle[float], "[model: str, case: str]"]:
    """Answer every case with every model, then grade each answer."""
    answers = context.run_step(
        "answer",
        answer,
        {"model": model, "question": question, "provider": provider},
        map_over=["model", "case"],
    )
    return context.run_step(
        "judge",
        grade_answer,
        {
            "judge": judge,
            "question": question,
            "expected": expected,
            "answer": answers,
            "provider": provider,
        },
        map_over=["model", "case"],
    )


JUDGE = Judge(model_name="gpt-4o", rubric="You are a strict judge. Reply YES or NO.")
CASES = [
    ("What is the capital of France?", "Paris"),
    ("What is 2 + 2?", "4"),
    ("What is the largest planet?", "Jupiter"),
    ("Who wrote Hamlet?", "Shakespeare"),
    ("What is the boiling point of water in Celsius?", "100"),
]
CASE_IDS = ["france", "arithmetic", "planet", "hamlet", "water"]


@pytest.mark.fxtr(
    evaluate,
    dims={"model": "model", "case": ("question", "expected")},
    inputs={"judge": JUDGE, "provider": PROVIDER},
    threshold=0.7,
)
@pytest.mark.parametrize("model", ["gpt-4o-mini", "claude-sonnet-4-5"])
@pytest.mark.parametrize(("question", "expected"), CASES, ids=CASE_IDS)
def test_qa(model, question, expected, result):
    """Each case is graded; the per-model mean must reach the threshold."""
    assert result in (0.0, 1.0)
