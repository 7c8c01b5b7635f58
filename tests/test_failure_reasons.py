"""Failure reasons of steps, model turns and retried steps (issue 36 item 8, DESIGN §3): a
crashed model call is ``unknown``, never ``tool_error``; a step that fails because its model
call did takes the call's reason (the seed's ``qa.answer`` shape, and through ``raise ... from``
and ``except`` chaining); a step that fails in three attempts in a row is ``stall``."""

from __future__ import annotations

import asyncio
from typing import Annotated

import fxtr
from fxtr.agents import Agent
from fxtr.evals import Case, evaluate, includes, register_mock
from fxtr.experiment.arrays import Array
from fxtr.experiment.handles import ArrayHandle
from fxtr.experiment.steps import StepContext, step
from fxtr.experiment.workflows import WorkflowContext, workflow
from fxtr.models import (
    ContentText,
    ModelCallError,
    ModelCallFailure,
    ModelRequest,
    RetryConfig,
    UserMessage,
    generate_with_retries,
)
from fxtr.tracing import classify


def _crash(request: ModelRequest) -> str:
    raise RuntimeError("the model's client crashed")


def test_a_crashed_model_turn_is_unknown_not_tool_error(tmp_path):
    """The call crashed (no provider said anything): unknown, on the call and on its turn."""
    mock = register_mock("reasons-crash", _crash)
    result = fxtr.run(
        evaluate,
        {
            "model": Array.from_mapping({mock.name: mock}, dims=["model"]),
            "case": Array.from_mapping({"x": Case(id="x", input="go", target="a")}, dims=["case"]),
            "scorer": includes(),
            "agent": Agent(),
        },
        store=tmp_path,
    )
    (turn,) = [i for i in result.invocations if i.status == "failed"]
    assert turn.address.endswith("/turn[0]")
    assert [c["reason"] for c in turn.model_calls] == ["unknown"]
    assert turn.reason == "unknown"
    node = result.graph.node(turn.address)
    assert node.reason == "unknown"


def _limited(request: ModelRequest) -> object:
    return ModelCallFailure(
        category="rate_limit", description="HTTP 429: slow down", status_code=429
    )


LIMITED = register_mock("reasons-429", _limited)


def _request(question: str) -> ModelRequest:
    return ModelRequest(context=(UserMessage(content=(ContentText(text=question),)),))


@step(name="reasons.seed")
async def seed_answer(context: StepContext, how: str, question: str) -> str:
    """The seed's qa.answer: a returned ModelCallFailure raised as a plain RuntimeError."""
    api = LIMITED.api()
    if how == "returned":
        response = await generate_with_retries(
            api, _request(question), retry=RetryConfig(max_attempts=1)
        )
        if isinstance(response, ModelCallFailure):
            raise RuntimeError(f"model call failed ({response.category}): {response.description}")
        return response.text
    try:
        return (await api.generate(_request(question))).text
    except ModelCallError as exc:
        if how == "from":
            raise RuntimeError("no answer") from exc
        raise RuntimeError("no answer")  # noqa: B904  # the implicit context is the point


@workflow(name="reasons.ask")
async def ask(
    context: WorkflowContext,
    how: Annotated[ArrayHandle[str], "[how: str]"],
    question: Annotated[ArrayHandle[str], "[]"],
) -> Annotated[ArrayHandle[str], "[how: str]"]:
    return context.run_step(
        "answer", seed_answer, {"how": how, "question": question}, map_over=["how"]
    )


def test_a_step_that_fails_because_its_model_call_did_takes_the_calls_reason(tmp_path):
    """Returned and raised plainly, raised from, raised while handling: budget, not tool_error."""
    ways = ["returned", "from", "context"]
    result = fxtr.run(
        ask,
        {"how": Array.from_mapping({w: w for w in ways}, dims=["how"]), "question": "q"},
        store=tmp_path,
    )
    got = {i.address.split("=")[1].rstrip("]"): (i.reason, i.category) for i in result.invocations}
    assert got == {w: ("budget", "rate_limit") for w in ways}
    for inv in result.invocations:
        assert inv.error.startswith("RuntimeError")
        assert [c["reason"] for c in inv.model_calls] == ["budget"]


def test_classify_follows_the_chain_but_not_what_from_none_hid():
    """A user's error raised from a 429 is budget; `from None` says it is the user's own."""
    failure = ModelCallError(ModelCallFailure(category="quota", description="x", status_code=429))
    try:
        try:
            raise failure
        except ModelCallError as exc:
            raise ValueError("wrapped") from exc
    except ValueError as wrapped:
        assert classify(wrapped) == "budget"
    try:
        try:
            raise failure
        except ModelCallError:
            raise ValueError("mine") from None
    except ValueError as hidden:
        assert classify(hidden) == "tool_error"
    assert classify(ValueError("plain")) == "tool_error"


@step(name="reasons.flaky")
async def always_fails(context: StepContext, key: str) -> str:
    raise ConnectionError(f"the tool's service is down for {key}")


@workflow(name="reasons.retried")
async def retried(
    context: WorkflowContext, keys: Annotated[ArrayHandle[str], "[case: str]"]
) -> Annotated[ArrayHandle[str], "[case: str]"]:
    return context.run_step("work", always_fails, {"key": keys}, map_over=["case"])


def test_a_step_failing_in_three_attempts_in_a_row_is_stall(tmp_path):
    """Resume is the job's retry: attempts 1 and 2 keep tool_error, the third is stall, and
    siblings failing in one attempt (the same step over cases) are not a retry loop."""
    keys = Array.from_mapping({"a": "a", "b": "b", "c": "c"}, dims=["case"])
    first = fxtr.run(retried, {"keys": keys}, store=tmp_path)
    assert {i.reason for i in first.invocations} == {"tool_error"}
    reasons = []
    for _ in range(3):
        again = asyncio.run(fxtr.resume(first.job_id, store=tmp_path))
        failed = [i for i in again.invocations if i.status == "failed"]
        assert len(failed) == 3
        reasons.append({i.reason for i in failed})
        assert {again.graph.node(i.address).reason for i in failed} == reasons[-1]
        assert {i.category for i in failed} == {None}  # the finer category stays the error's
    assert reasons == [{"tool_error"}, {"stall"}, {"stall"}]
