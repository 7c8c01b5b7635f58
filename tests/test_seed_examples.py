"""The seed's examples as written (issue 40 item 5): ``field`` on dataclass and TypedDict
results, ``Array.from_items``, ``keys()`` and ``items()`` for building and reading arrays."""

from __future__ import annotations

import dataclasses
from typing import Annotated, TypedDict

import pytest

from fxtr import (
    Array,
    ArrayHandle,
    BoundID,
    Entity,
    ScalarHandle,
    SignatureError,
    StepContext,
    WorkflowContext,
    run,
    step,
    workflow,
)
from fxtr.experiment._encoding import EncodingError, decode_text, encode_text


@dataclasses.dataclass(frozen=True)
class Review:
    proposal: str | None
    score: float


class ReviewDict(TypedDict):
    proposal: str | None
    score: float


@dataclasses.dataclass
class Holder:
    thing: object


class Draft(Entity):
    text: str


class ReviewEntity(Entity):
    proposal: BoundID[Draft] | None


def _proposal(draft: str) -> str | None:
    return None if len(draft) >= 5 else draft + "!"


@step(name="seed.review_dataclass")
async def review_dataclass(context: StepContext, draft: str) -> Review:
    return Review(proposal=_proposal(draft), score=1.0)


@step(name="seed.review_typeddict")
async def review_typeddict(context: StepContext, draft: str) -> ReviewDict:
    return {"proposal": _proposal(draft), "score": 1.0}


@step(name="seed.review_entity")
async def review_entity(context: StepContext, draft: Draft) -> ReviewEntity:
    proposal = _proposal(draft.text)
    return ReviewEntity(
        proposal=None if proposal is None else await context.store(Draft(text=proposal))
    )


REVIEWERS = {"dataclass": review_dataclass, "typeddict": review_typeddict}


@workflow(name="seed.refine")
async def refine(
    context: WorkflowContext, draft: ScalarHandle[str], kind: str
) -> ScalarHandle[str]:
    """The seed's refinement loop, with a reviewer returning a dataclass or a TypedDict."""
    current = draft
    for round in range(10):
        review = context.run_step(f"review_{round}", REVIEWERS[kind], {"draft": current})
        proposal = await review.field("proposal").collect().item()
        if proposal is None:
            break
        current = context.add_source_array(f"draft_{round + 1}", Array.scalar(proposal, str))
    return current


@workflow(name="seed.refine_entity")
async def refine_entity(
    context: WorkflowContext, draft: ScalarHandle[BoundID[Draft]]
) -> ScalarHandle[BoundID[Draft]]:
    """The seed's loop as written: the proposal is a reference to a Draft."""
    current = draft
    for round in range(10):
        review = context.run_step(f"review_{round}", review_entity, {"draft": current})
        proposal = await review.field("proposal").collect().item()
        if proposal is None:
            break
        current = context.add_source_array(
            f"draft_{round + 1}", Array.scalar(proposal, BoundID[Draft])
        )
    return current


@pytest.mark.parametrize("kind", ["dataclass", "typeddict"])
def test_field_of_a_dataclass_or_typeddict_result(kind):
    result = run(refine, {"draft": "ab", "kind": kind})
    assert result.status == "succeeded" and result.output.item() == "ab!!!"
    assert len(result.invocations) == 4  # ab, ab!, ab!!, ab!!! (no proposal)
    again = run(refine, {"draft": "ab", "kind": kind})  # read back from the cache
    assert again.output.item() == "ab!!!" and all(i.from_cache for i in again.invocations)


def test_field_of_an_entity_result_as_the_seed_writes_it():
    result = run(refine_entity, {"draft": Draft(text="ab")})
    assert result.status == "succeeded"
    assert result.output.item() == BoundID.of(Draft(text="ab!!!"))


def test_a_field_the_type_does_not_have_is_refused_when_scheduled():
    @workflow(name="seed.bad_field")
    async def bad(context: WorkflowContext, draft: ScalarHandle[str]) -> ScalarHandle[str]:
        review = context.run_step("review", review_dataclass, {"draft": draft})
        return review.field("proposals").collect()

    with pytest.raises(
        SignatureError, match="Review has no field 'proposals'; its fields are proposal, score"
    ):
        run(bad, {"draft": "ab"})


def test_dataclass_values_round_trip_and_bad_fields_are_named():
    value = Review(proposal="x", score=0.5)
    text = encode_text(value)
    assert text == '{"$data":"tests.test_seed_examples:Review","v":{"proposal":"x","score":0.5}}'
    assert decode_text(text) == value

    @dataclasses.dataclass
    class Local:
        x: int

    with pytest.raises(EncodingError, match="Local, a dataclass defined inside a function"):
        encode_text(Local(x=1))

    with pytest.raises(SignatureError, match="field 'thing' of Holder: object is not"):

        @step(name="seed.holder")
        async def holder(context: StepContext) -> Holder:
            return Holder(thing=1)


def test_from_items_keys_and_items():
    prompts = Array.from_items([("p1", "Hi"), ("p2", "Bye")], "[prompt: str]", str)
    assert prompts.keys() == (("p1",), ("p2",)) and prompts.keys("prompt") == ("p1", "p2")
    assert list(prompts.items()) == [(("p1",), "Hi"), (("p2",), "Bye")]
    # the original's form: the type as a (dims, value type) pair; keys as tuples or mappings
    grid = Array.from_items(
        [(("m", 1), 0.5), ({"model": "m", "sample": 2}, 1.0)], ("[model: str, sample: int]", float)
    )
    assert grid.dims == ("model", "sample") and grid["m", 2] == 1.0
    assert Array.from_items(grid.items(), "[model: str, sample: int]", float) == grid
    assert Array.from_items([], "[prompt: str]", str).shape == {"prompt": 0}
    with pytest.raises(ValueError, match="two items at prompt='p1'"):
        Array.from_items([("p1", "a"), ("p1", "b")], ["prompt"])
    with pytest.raises(ValueError, match="ragged.*1 combination"):
        Array.from_items([(("a", 1), 0.0), (("b", 2), 1.0), (("a", 2), 1.0)], ["x", "y"])
    with pytest.raises(TypeError, match="not str"):
        Array.from_items([("p1", 3)], "[prompt: str]", str)


def test_from_items_builds_a_launchers_input():
    @step(name="seed.shout")
    async def shout(context: StepContext, text: str) -> str:
        return text.upper()

    @workflow(name="seed.shout_all")
    async def shout_all(
        context: WorkflowContext, texts: Annotated[ArrayHandle[str], "[prompt: str]"]
    ) -> Annotated[ArrayHandle[str], "[prompt: str]"]:
        return context.run_step("shout", shout, {"text": texts}, map_over=["prompt"])

    texts = Array.from_items([(f"p{i}", f"hello {i}") for i in range(3)], "[prompt: str]", str)
    out = run(shout_all, {"texts": texts}).output
    assert dict(out.items()) == {("p0",): "HELLO 0", ("p1",): "HELLO 1", ("p2",): "HELLO 2"}


def test_the_base_url_comes_from_the_environment_as_the_sdks_read_it(monkeypatch):
    """OPENAI_BASE_URL / ANTHROPIC_BASE_URL when base_url is not given; base_url= wins."""
    import asyncio

    import respx

    from fxtr.models import (
        AnthropicMessagesAPI,
        ContentText,
        ModelRequest,
        OpenAIResponsesAPI,
        UserMessage,
    )

    request = ModelRequest(context=(UserMessage(content=(ContentText(text="hi"),)),))
    body = {
        "status": "completed",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "ok"}]}],
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/anthropic")
    assert OpenAIResponsesAPI("gpt-5-mini").base_url == "http://127.0.0.1:9/v1"
    assert AnthropicMessagesAPI("claude").base_url == "http://127.0.0.1:9/anthropic"
    assert OpenAIResponsesAPI("m", base_url="http://other/v1").base_url == "http://other/v1"

    async def call():
        api = OpenAIResponsesAPI("gpt-5-mini", api_key="sk-test")
        try:
            with respx.mock(assert_all_called=True) as mock:
                route = mock.post("http://127.0.0.1:9/v1/responses").respond(200, json=body)
                return (await api.generate(request)).text, route.call_count
        finally:
            await api.aclose()

    assert asyncio.run(call()) == ("ok", 1)
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert OpenAIResponsesAPI("gpt-5-mini").base_url == "https://api.openai.com/v1"
