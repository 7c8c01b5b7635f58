"""The seed's examples, adapted only in imports; shared by the engine, cache and record tests."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fxtr.experiment.arrays import Array
from fxtr.experiment.entities import BoundID, Entity
from fxtr.experiment.handles import ArrayHandle, ScalarHandle
from fxtr.experiment.steps import StepContext, step
from fxtr.experiment.workflows import WorkflowContext, workflow

CALLS: list[str] = []
"""Addresses of step bodies that actually ran (tests clear it)."""
FAIL: set[str] = set()
"""Questions for which `qa.answer` raises (tests set it)."""


class ModelConfig(Entity):
    model_name: str
    temperature: float = 0.0


class Answer(Entity):
    question: str
    text: str


@step(name="qa.answer")
async def answer(context: StepContext, config: ModelConfig, question: str) -> Answer:
    """Answer a question (a deterministic stand-in for a model)."""
    CALLS.append(context.cache_key)
    await asyncio.sleep(0)
    if question in FAIL:
        raise ConnectionError(f"provider unreachable for {question!r}")
    return Answer(question=question, text=f"{config.model_name} says {question.upper()}")


@step(name="qa.score")
async def score(context: StepContext, answer: Answer) -> float:
    """1.0 when the answer repeats the question."""
    CALLS.append(context.cache_key)
    return 1.0 if answer.question.upper() in answer.text else 0.0


@step(name="qa.mean")
async def mean(context: StepContext, scores: Annotated[Array[float], "[prompt: str]"]) -> float:
    CALLS.append(context.cache_key)
    values = list(scores.values())
    return sum(values) / len(values)


@workflow(name="qa.summarize")
async def summarize(
    context: WorkflowContext, scores: Annotated[ArrayHandle[float], "[prompt: str]"]
) -> ScalarHandle[float]:
    return context.run_step("mean", mean, {"scores": scores})


@workflow(name="qa.evaluate")
async def evaluate(
    context: WorkflowContext,
    prompts: Annotated[ArrayHandle[str], "[prompt: str]"],
    models: Annotated[ArrayHandle[BoundID[ModelConfig]], "[model: str]"],
) -> Annotated[ArrayHandle[float], "[model: str]"]:
    """Answer every prompt with every model and summarize each model's scores."""
    answers = context.run_step(
        "answer", answer, {"config": models, "question": prompts}, map_over=["model", "prompt"]
    )
    scores = context.run_step("score", score, {"answer": answers}, map_over=["model", "prompt"])
    return context.run_child_workflow(
        "summarize", summarize, {"scores": scores}, map_over=["model"]
    )


def qa_inputs(prompts: dict[str, str] | None = None, models: tuple[str, ...] = ("a", "b")):
    prompts = prompts or {"p1": "what is two plus two", "p2": "capital of france"}
    return {
        "prompts": Array.from_mapping(prompts, dims=["prompt"], value_type=str),
        "models": Array.from_mapping(
            {m: ModelConfig(model_name=m) for m in models}, dims=["model"]
        ),
    }


class Draft(Entity):
    text: str


class Review(Entity):
    proposal: BoundID[Draft] | None


@step(name="refine.review")
async def review_draft(context: StepContext, draft: Draft) -> Review:
    """Propose a longer draft until it has five characters."""
    CALLS.append(context.cache_key)
    if len(draft.text) >= 5:
        return Review(proposal=None)
    return Review(proposal=await context.store(Draft(text=draft.text + "+")))


@workflow(name="refine.loop")
async def refine(
    context: WorkflowContext, draft: ScalarHandle[BoundID[Draft]], max_rounds: int
) -> ScalarHandle[BoundID[Draft]]:
    current = draft
    for round in range(max_rounds):
        review = context.run_step(f"review_{round}", review_draft, {"draft": current})
        proposal = await review.field("proposal").collect().item()
        if proposal is None:
            break
        current = context.add_source_array(
            f"draft_{round + 1}", Array.scalar(proposal, BoundID[Draft])
        )
    return current
