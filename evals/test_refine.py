"""A hand-written workflow: a writer revises an outline until a reviewer is satisfied.

When the kit's `evaluate` is not enough, write your own steps and workflows: here a loop
whose length depends on what a step returned. Each round's step has a stable name
(`review_0`, `review_1`, ...), so replays rebuild the same sequence; the record keeps how many
rounds each topic took. The writer is a `fxtr.evals.Model` passed as an input, so its name is
part of every fingerprint (with OPENAI_API_KEY set it is the real `openai/gpt-5-nano`).
"""

from __future__ import annotations

import os
from typing import Annotated

import pytest

from fxtr import (
    Array,
    ArrayHandle,
    BoundID,
    Entity,
    ScalarHandle,
    StepContext,
    WorkflowContext,
    step,
    workflow,
)
from fxtr.evals import Model, register_mock, user_text
from fxtr.models import ContentText, ModelRequest, UserMessage

MAX_ROUNDS = 4


class Draft(Entity):
    topic: str
    bullets: list[str]


class Review(Entity):
    satisfied: bool
    proposal: BoundID[Draft] | None


def _writer_reply(request: ModelRequest) -> str:
    count = user_text(request).count("\n- ")
    return f"point {count + 1} about the topic"


WRITER = (
    Model("openai/gpt-5-nano")
    if os.environ.get("OPENAI_API_KEY")
    else register_mock("writer", _writer_reply, price_as="gpt-5-nano")
)


@step(name="refine.review")
async def review_draft(context: StepContext, draft: Draft, writer: Model) -> Review:
    """Accept a draft with three bullets; otherwise ask the writer for one more."""
    if len(draft.bullets) >= 3:
        return Review(satisfied=True, proposal=None)
    prompt = f"Add one short bullet to this outline on {draft.topic}:\n" + "".join(
        f"\n- {b}" for b in draft.bullets
    )
    api = writer.api()
    try:
        request = ModelRequest(context=(UserMessage(content=(ContentText(text=prompt),)),))
        bullet = (await api.generate(request)).text.strip()
    finally:
        await api.aclose()
    better = Draft(topic=draft.topic, bullets=[*draft.bullets, bullet])
    return Review(satisfied=False, proposal=await context.store(better))


@step(name="refine.start")
async def start(context: StepContext, topic: str) -> Draft:
    return Draft(topic=topic, bullets=[])


@step(name="refine.length")
async def length(context: StepContext, draft: Draft) -> int:
    return len(draft.bullets)


@workflow(name="refine.one")
async def refine_one(
    context: WorkflowContext, topic: ScalarHandle[str], writer: ScalarHandle[BoundID[Model]]
) -> ScalarHandle[int]:
    """Revise one topic's outline until the reviewer is satisfied (at most MAX_ROUNDS)."""
    current = context.run_step("start", start, {"topic": topic})
    for round in range(MAX_ROUNDS):
        review = context.run_step(
            f"review_{round}", review_draft, {"draft": current, "writer": writer}
        )
        proposal = await review.field("proposal").collect().item()
        if proposal is None:
            break
        current = context.add_source_array(
            f"draft_{round + 1}", Array.scalar(proposal, BoundID[Draft])
        )
    return context.run_step("length", length, {"draft": current})


@workflow(name="refine.all")
async def refine_all(
    context: WorkflowContext,
    topic: Annotated[ArrayHandle[str], "[case: str]"],
    writer: ScalarHandle[BoundID[Model]],
) -> Annotated[ArrayHandle[int], "[case: str]"]:
    return context.run_child_workflow(
        "refine", refine_one, {"topic": topic, "writer": writer}, map_over=["case"]
    )


@pytest.mark.fxtr(refine_all, inputs={"writer": WRITER})
@pytest.mark.parametrize("topic", ["solar power", "tidal energy", "geothermal heat"])
def test_outline_converges(topic, result):
    """Every outline ends with three bullets, within the round limit."""
    assert result == 3
