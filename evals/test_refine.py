"""A data-dependent loop: a writer revises an outline until a reviewer is satisfied.

Each round's step has a stable name (`review_0`, `review_1`, ...), so replays rebuild the
same sequence; the record keeps how many rounds each topic took.
"""

from __future__ import annotations

from typing import Annotated

import pytest
from evalkit import PROVIDER, ask, model_api

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

MAX_ROUNDS = 4


class Draft(Entity):
    topic: str
    bullets: list[str]


class Review(Entity):
    satisfied: bool
    proposal: BoundID[Draft] | None


def _writer_reply(request):
    text = request.context[-1].content[0].text
    count = text.count("\n- ")
    return f"point {count + 1} about the topic"


@step(name="refine.review")
async def review_draft(context: StepContext, draft: Draft, provider: str) -> Review:
    """Accept a draft with three bullets; otherwise ask the writer for one more."""
    if len(draft.bullets) >= 3:
        return Review(satisfied=True, proposal=None)
    api = model_api("gpt-4o-mini", reply=_writer_reply)
    prompt = f"Add one bullet to this outline on {draft.topic}:\n" + "".join(
        f"\n- {b}" for b in draft.bullets
    )
    try:
        bullet = (await api.generate(ask(prompt))).text.strip()
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
    context: WorkflowContext, topic: ScalarHandle[str], provider: ScalarHandle[str]
) -> ScalarHandle[int]:
    """Revise one topic's outline until the reviewer is satisfied (at most MAX_ROUNDS)."""
    current = context.run_step("start", start, {"topic": topic})
    for round in range(MAX_ROUNDS):
        review = context.run_step(
            f"review_{round}", review_draft, {"draft": current, "provider": provider}
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
    provider: ScalarHandle[str],
) -> Annotated[ArrayHandle[int], "[case: str]"]:
    return context.run_child_workflow(
        "refine", refine_one, {"topic": topic, "provider": provider}, map_over=["case"]
    )


@pytest.mark.fxtr(refine_all, inputs={"provider": PROVIDER})
@pytest.mark.parametrize("topic", ["solar power", "tidal energy", "geothermal heat"])
def test_outline_converges(topic, result):
    """Every outline ends with three bullets, within the round limit."""
    assert result == 3
