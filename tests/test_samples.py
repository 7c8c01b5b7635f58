"""Repeated samples (DESIGN §7): a trailing ``sample`` dimension, one address per sample."""

from __future__ import annotations

import asyncio
from typing import Annotated

import pytest

from fxtr import (
    Array,
    ArrayHandle,
    DeterminismError,
    ScalarHandle,
    SignatureError,
    StepContext,
    WorkflowContext,
    resume,
    run,
    step,
    workflow,
)

RAN: list[tuple[str, int | None]] = []
"""(address, context.sample) of every step body that executed."""
FAIL_AT: set[str] = set()


@pytest.fixture(autouse=True)
def _reset():
    RAN.clear()
    FAIL_AT.clear()
    yield
    FAIL_AT.clear()


@step(name="s.draw")
async def draw(context: StepContext, question: str) -> str:
    RAN.append((context.address, context.sample))
    if context.address in FAIL_AT:
        raise ConnectionError("provider unreachable")
    return f"{question}#{context.sample}"


@step(name="s.judge")
async def judge(context: StepContext, answer: str) -> bool:
    RAN.append((context.address, context.sample))
    return answer.endswith(("#0", "#2", "#4", "#6", "#8"))


@step(name="s.grid")
async def grid(context: StepContext, question: str) -> Annotated[Array[int], "[part: str]"]:
    RAN.append((context.address, context.sample))
    sample = context.sample
    assert sample is not None
    return Array.from_mapping({"x": sample, "y": 10 * sample}, dims=["part"], value_type=int)


@workflow(name="s.sampled")
async def sampled(
    context: WorkflowContext,
    questions: Annotated[ArrayHandle[str], "[case: str]"],
    samples: int,
) -> Annotated[ArrayHandle[bool], "[case: str, sample: int]"]:
    answers = context.run_step(
        "answer", draw, {"question": questions}, map_over=["case"], samples=samples
    )
    return context.run_step("judge", judge, {"answer": answers}, map_over=["case", "sample"])


def _questions(*cases: str) -> Array[str]:
    return Array.from_mapping({c: f"q-{c}" for c in cases}, dims=["case"], value_type=str)


def _ran() -> list[str]:
    return sorted(address for address, _ in RAN)


def test_every_cell_runs_k_times_with_its_own_address_and_index():
    result = run(sampled, {"questions": _questions("c1", "c2"), "samples": 3})
    assert result.status == "succeeded"
    assert result.output is not None
    assert result.output.dims == ("case", "sample")
    assert result.output.keys("sample") == (0, 1, 2)
    assert result.output.to_dict() == {
        "c1": {0: True, 1: False, 2: True},
        "c2": {0: True, 1: False, 2: True},
    }
    draws = sorted((a, s) for a, s in RAN if "/answer" in a)
    assert draws == [
        (f"s.sampled/answer[case={c},sample={i}]", i) for c in ("c1", "c2") for i in range(3)
    ]
    # a downstream step mapped over `sample` is not sampled itself
    judged = [(a, s) for a, s in RAN if "/judge" in a]
    assert len(judged) == 6
    assert {s for _, s in judged} == {None}
    assert "s.sampled/judge[case=c2,sample=1]" in {inv.address for inv in result.invocations}


def test_raising_k_tops_up_and_lowering_k_uses_the_first_samples():
    run(sampled, {"questions": _questions("c1"), "samples": 5})
    assert len([a for a in _ran() if "/answer" in a]) == 5
    RAN.clear()
    more = run(sampled, {"questions": _questions("c1"), "samples": 10})
    assert more.status == "succeeded"
    assert sorted(s for a, s in RAN if "/answer" in a) == [5, 6, 7, 8, 9]
    cached = {
        inv.address for inv in more.invocations if inv.from_cache and "/answer" in inv.address
    }
    assert cached == {f"s.sampled/answer[case=c1,sample={i}]" for i in range(5)}
    RAN.clear()
    fewer = run(sampled, {"questions": _questions("c1"), "samples": 2})
    assert RAN == []
    assert fewer.output is not None
    assert fewer.output.keys("sample") == (0, 1)
    assert all(inv.from_cache for inv in fewer.invocations)


def test_a_failed_sample_is_resumed_alone():
    FAIL_AT.add("s.sampled/answer[case=c1,sample=1]")
    first = run(sampled, {"questions": _questions("c1", "c2"), "samples": 3})
    assert first.status == "failed"
    assert first.partial_output is not None
    assert first.missing.keys() == {("c1", 1)}
    assert first.partial_output.to_dict()["c2"] == {0: True, 1: False, 2: True}
    FAIL_AT.clear()
    RAN.clear()
    second = asyncio.run(resume(first.job_id))
    assert second.status == "succeeded"
    assert second.attempt == 2
    assert _ran() == [
        "s.sampled/answer[case=c1,sample=1]",
        "s.sampled/judge[case=c1,sample=1]",
    ]


def test_unsampled_steps_see_no_sample():
    @workflow(name="s.plain")
    async def plain(
        context: WorkflowContext, questions: Annotated[ArrayHandle[str], "[case: str]"]
    ) -> Annotated[ArrayHandle[str], "[case: str]"]:
        return context.run_step("answer", draw, {"question": questions}, map_over=["case"])

    result = run(plain, {"questions": _questions("c1")})
    assert result.output is not None
    assert result.output.to_dict() == {"c1": "q-c1#None"}
    assert RAN == [("s.plain/answer[case=c1]", None)]


def test_one_sample_still_has_the_dimension():
    result = run(sampled, {"questions": _questions("c1"), "samples": 1})
    assert result.output is not None
    assert result.output.dims == ("case", "sample")
    assert result.output.keys("sample") == (0,)


def test_unmapped_step_is_sampled_and_samples_is_a_plain_int():
    @workflow(name="s.scalar")
    async def scalar(
        context: WorkflowContext, question: str
    ) -> Annotated[ArrayHandle[str], "[sample: int]"]:
        return context.run_step("answer", draw, {"question": question}, samples=4)

    result = run(scalar, {"question": "why"})
    assert result.output is not None
    assert result.output.to_dict() == {i: f"why#{i}" for i in range(4)}
    assert _ran() == [f"s.scalar/answer[sample={i}]" for i in range(4)]


def test_sample_dimension_is_trailing_after_the_steps_own_dimensions():
    @workflow(name="s.grids")
    async def grids(
        context: WorkflowContext, questions: Annotated[ArrayHandle[str], "[case: str]"]
    ) -> Annotated[ArrayHandle[int], "[case: str, part: str, sample: int]"]:
        return context.run_step("grid", grid, {"question": questions}, map_over=["case"], samples=2)

    result = run(grids, {"questions": _questions("c1", "c2")})
    assert result.status == "succeeded", [i.error for i in result.invocations]
    assert result.output is not None
    assert result.output.dims == ("case", "part", "sample")
    assert result.output.to_dict()["c2"] == {"x": {0: 0, 1: 1}, "y": {0: 0, 1: 10}}
    assert len(RAN) == 4


def test_sampling_inputs_that_carry_sample_is_a_signature_error_naming_the_fix():
    @workflow(name="s.twice")
    async def twice(
        context: WorkflowContext, questions: Annotated[ArrayHandle[str], "[case: str]"]
    ) -> Annotated[ArrayHandle[bool], "[case: str, sample: int]"]:
        answers = context.run_step(
            "answer", draw, {"question": questions}, map_over=["case"], samples=2
        )
        return context.run_step("judge", judge, {"answer": answers}, map_over=["case"], samples=2)

    with pytest.raises(SignatureError) as err:
        run(twice, {"questions": _questions("c1")})
    message = str(err.value)
    assert "'judge'" in message
    assert "'sample'" in message
    assert "map_over=[..., 'sample']" in message


@pytest.mark.parametrize(
    ("samples", "error"),
    [
        (0, ValueError),
        (-2, ValueError),
        (True, SignatureError),
        ("3", SignatureError),
        (2.0, SignatureError),
    ],
)
def test_bad_sample_counts_are_refused_at_scheduling_time(samples, error):
    @workflow(name="s.bad")
    async def bad(
        context: WorkflowContext, questions: Annotated[ArrayHandle[str], "[case: str]"]
    ) -> Annotated[ArrayHandle[str], "[case: str, sample: int]"]:
        return context.run_step(
            "answer", draw, {"question": questions}, map_over=["case"], samples=samples
        )

    with pytest.raises(error, match="samples="):
        run(bad, {"questions": _questions("c1")})
    assert RAN == []


@workflow(name="s.inner")
async def inner(context: WorkflowContext, question: ScalarHandle[str]) -> ScalarHandle[str]:
    return context.run_step("answer", draw, {"question": question})


@workflow(name="s.outer")
async def outer(
    context: WorkflowContext, questions: Annotated[ArrayHandle[str], "[case: str]"]
) -> Annotated[ArrayHandle[str], "[case: str, sample: int]"]:
    return context.run_child_workflow(
        "child", inner, {"question": questions}, map_over=["case"], samples=2
    )


def test_sampled_child_workflow_runs_per_sample_and_its_steps_see_the_index():
    result = run(outer, {"questions": _questions("c1", "c2")})
    assert result.status == "succeeded"
    assert result.output is not None
    assert result.output.dims == ("case", "sample")
    assert result.output.to_dict() == {
        "c1": {0: "q-c1#0", 1: "q-c1#1"},
        "c2": {0: "q-c2#0", 1: "q-c2#1"},
    }
    assert sorted(RAN) == [
        (f"s.outer/child[case={c},sample={i}]/answer", i) for c in ("c1", "c2") for i in (0, 1)
    ]
    assert {w.address for w in result.workflows} >= {"s.outer/child[case=c1,sample=1]"}


def test_replay_with_another_sample_count_is_a_determinism_error():
    first = run(sampled, {"questions": _questions("c1"), "samples": 2})

    @workflow(name="s.sampled")
    async def changed(
        context: WorkflowContext,
        questions: Annotated[ArrayHandle[str], "[case: str]"],
        samples: int,
    ) -> Annotated[ArrayHandle[bool], "[case: str, sample: int]"]:
        answers = context.run_step(
            "answer", draw, {"question": questions}, map_over=["case"], samples=samples + 1
        )
        return context.run_step("judge", judge, {"answer": answers}, map_over=["case", "sample"])

    from fxtr.experiment._jobs import verify

    with pytest.raises(DeterminismError, match="samples"):
        asyncio.run(verify(first.job_id, workflow=changed))
