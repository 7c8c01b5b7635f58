from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fxtr import (
    Array,
    ArrayHandle,
    BoundID,
    Entity,
    ScalarHandle,
    SignatureError,
    StepContext,
    UpstreamFailedError,
    WorkflowContext,
    launch,
    run,
    step,
    workflow,
)
from tests import examples
from tests.examples import Draft, evaluate, qa_inputs, refine


def test_seed_qa_example_runs_as_written():
    """qa.evaluate maps answer and score over model x prompt and summarizes per model."""
    result = run(evaluate, qa_inputs())
    assert result.status == "succeeded"
    assert result.attempt == 1
    assert result.output.dims == ("model",)
    assert result.output.to_dict() == {"a": 1.0, "b": 1.0}
    addresses = {inv.address for inv in result.invocations}
    assert "qa.evaluate/answer[model=a,prompt=p1]" in addresses
    assert "qa.evaluate/summarize[model=b]/mean" in addresses
    assert len(addresses) == 4 + 4 + 2
    assert {inv.step for inv in result.invocations} == {"qa.answer", "qa.score", "qa.mean"}
    assert all(inv.status == "succeeded" and not inv.from_cache for inv in result.invocations)


def test_seed_refinement_loop_runs_as_written():
    """The refinement loop observes each review and stops when the judge is satisfied."""
    result = run(refine, {"draft": Draft(text="ab"), "max_rounds": 10})
    assert result.status == "succeeded"
    ref = result.output.item()
    assert isinstance(ref, BoundID)
    assert result.store.get_entity(ref.id) is not None
    assert [inv.address for inv in result.invocations] == [
        f"refine.loop/review_{i}" for i in range(4)
    ]


def test_failed_step_skips_dependents_and_independent_work_goes_on():
    """A raising step fails its invocation, skips what depends on it, and nothing else."""
    examples.FAIL.add("capital of france")
    result = run(evaluate, qa_inputs())
    assert result.status == "failed"
    assert result.output is None
    by = {inv.address: inv for inv in result.invocations}
    failed = by["qa.evaluate/answer[model=a,prompt=p2]"]
    assert failed.status == "failed"
    assert failed.reason == "tool_error"
    assert failed.error.startswith("ConnectionError: provider unreachable")
    assert "Traceback" in failed.traceback
    assert by["qa.evaluate/score[model=a,prompt=p2]"].status == "skipped"
    assert by["qa.evaluate/score[model=a,prompt=p1]"].status == "succeeded"
    assert by["qa.evaluate/summarize[model=a]/mean"].status == "skipped"
    assert by["qa.evaluate/summarize[model=a]/mean"].reason is None
    assert "qa.evaluate/score[model=b,prompt=p1]" in examples.CALLS


SLOW = 5.0
"""Seconds the slow steps take: far above any scheduling delay of a loaded machine."""


@step(name="t.slow")
async def slow(context: StepContext, x: int) -> int:
    await asyncio.sleep(SLOW)
    return x


@step(name="t.needs_str")
async def needs_str(context: StepContext, text: str) -> str:
    return text


@workflow(name="t.mismatch_after_slow")
async def mismatch_after_slow(context: WorkflowContext, x: ScalarHandle[int]) -> ScalarHandle[str]:
    number = context.run_step("slow", slow, {"x": x})
    return context.run_step("text", needs_str, {"text": number})


def test_type_mismatch_is_raised_at_scheduling_time_without_waiting():
    """A mismatch scheduled after a slow step is raised before the slow step ends."""
    start = time.perf_counter()
    with pytest.raises(SignatureError) as info:
        run(mismatch_after_slow, {"x": 1})
    assert time.perf_counter() - start < SLOW / 2
    msg = str(info.value)
    assert "In workflow 't.mismatch_after_slow', operation 'text'" in msg
    assert "Step 't.needs_str' expects 'text: str'" in msg
    assert "ScalarHandle[int] from step 't.slow'" in msg


@workflow(name="t.dims_mismatch")
async def dims_mismatch(
    context: WorkflowContext, prompts: Annotated[ArrayHandle[str], "[prompt: str]"]
) -> ScalarHandle[str]:
    return context.run_step("text", needs_str, {"text": prompts})


def test_leftover_dimension_names_the_fix():
    """A dimension left after mapping that the parameter lacks says: map over it."""
    with pytest.raises(SignatureError) as info:
        run(dims_mismatch, {"prompts": Array.from_mapping({"p": "x"}, dims=["prompt"])})
    msg = str(info.value)
    assert "ArrayHandle[str] with dims [prompt: str] from input 'prompts'" in msg
    assert "Map over 'prompt'" in msg


@workflow(name="t.bad_inputs")
async def bad_inputs(context: WorkflowContext, x: ScalarHandle[str]) -> ScalarHandle[str]:
    context.run_step("a", needs_str, {"txt": x})
    raise AssertionError("unreachable")


def test_unknown_and_missing_inputs_are_listed_together():
    """Unknown and missing inputs are one SignatureError."""
    with pytest.raises(SignatureError) as info:
        run(bad_inputs, {"x": "hi"})
    msg = str(info.value)
    assert "has no parameter 'txt'" in msg and "needs input 'text'" in msg


@workflow(name="t.unknown_map")
async def unknown_map(context: WorkflowContext, x: ScalarHandle[str]) -> ScalarHandle[str]:
    return context.run_step("a", needs_str, {"text": x}, map_over=["prompt"])


def test_mapped_dimension_no_input_has():
    """Mapping over a dimension no input has is a SignatureError."""
    with pytest.raises(SignatureError, match="map_over names dimension 'prompt' but no input"):
        run(unknown_map, {"x": "hi"})


@workflow(name="t.twice")
async def twice(context: WorkflowContext, x: ScalarHandle[str]) -> ScalarHandle[str]:
    context.run_step("a", needs_str, {"text": x})
    return context.run_step("a", needs_str, {"text": x})


def test_same_name_twice_is_a_value_error():
    """Scheduling one name twice names the workflow and the name."""
    with pytest.raises(ValueError, match="'t.twice' scheduled 'a' twice"):
        run(twice, {"x": "hi"})


def test_launch_input_errors():
    """Missing and mistyped launch inputs are SignatureErrors naming the workflow."""
    with pytest.raises(SignatureError, match="Launching workflow 't.twice'.*needs input 'x'"):
        run(twice, {})
    with pytest.raises(SignatureError, match="expects 'x: ArrayHandle\\[str\\]"):
        run(twice, {"x": 3})


@step(name="t.nap")
async def nap(context: StepContext, i: int) -> int:
    await asyncio.sleep(0.2)
    return i


@workflow(name="t.naps")
async def naps(
    context: WorkflowContext, items: Annotated[ArrayHandle[int], "[i: int]"]
) -> Annotated[ArrayHandle[int], "[i: int]"]:
    return context.run_step("nap", nap, {"i": items}, map_over=["i"])


def test_independent_steps_run_concurrently():
    """20 steps sleeping 0.2 s with concurrency 20 take about one sleep, not twenty."""
    items = Array.from_mapping({i: i for i in range(20)}, dims=["i"], value_type=int)
    start = time.perf_counter()
    result = run(naps, {"items": items}, concurrency=20, verify=False)
    assert time.perf_counter() - start < 1.5
    assert result.output.to_dict() == {i: i for i in range(20)}


def test_concurrency_limit_is_respected():
    """With concurrency 2, 4 sleeping steps take two rounds."""
    items = Array.from_mapping({i: i for i in range(4)}, dims=["i"], value_type=int)
    start = time.perf_counter()
    run(naps, {"items": items}, concurrency=2, verify=False)
    assert time.perf_counter() - start >= 0.38


ACTIVE = {"now": 0, "peak": 0}


@step(name="t.limited", concurrency=1)
async def limited(context: StepContext, i: int) -> int:
    ACTIVE["now"] += 1
    ACTIVE["peak"] = max(ACTIVE["peak"], ACTIVE["now"])
    await asyncio.sleep(0.01)
    ACTIVE["now"] -= 1
    return i


@workflow(name="t.limited_wf")
async def limited_wf(
    context: WorkflowContext, items: Annotated[ArrayHandle[int], "[i: int]"]
) -> Annotated[ArrayHandle[int], "[i: int]"]:
    return context.run_step("l", limited, {"i": items}, map_over=["i"])


def test_per_step_concurrency():
    """A step's own concurrency limit holds under a higher global one."""
    ACTIVE.update(now=0, peak=0)
    run(limited_wf, {"items": Array.from_mapping({i: i for i in range(5)}, dims=["i"])})
    assert ACTIVE["peak"] == 1


@step(name="t.timeout", timeout=0.05)
async def times_out(context: StepContext, i: int) -> int:
    await asyncio.sleep(1)
    return i


@workflow(name="t.timeout_wf")
async def timeout_wf(context: WorkflowContext, i: ScalarHandle[int]) -> ScalarHandle[int]:
    return context.run_step("t", times_out, {"i": i})


def test_step_timeout_fails_the_invocation_as_tool_error():
    """A step over its timeout fails with TimeoutError, classified tool_error."""
    result = run(timeout_wf, {"i": 1})
    inv = result.invocations[0]
    assert inv.status == "failed" and inv.reason == "tool_error"
    assert inv.error.startswith("TimeoutError")


@step(name="t.unencodable")
async def unencodable(context: StepContext, i: int) -> Any:
    return object()


@workflow(name="t.unencodable_wf")
async def unencodable_wf(context: WorkflowContext, i: ScalarHandle[int]) -> ScalarHandle[Any]:
    return context.run_step("u", unencodable, {"i": i})


def test_unencodable_result_fails_with_type_error_naming_step_and_type():
    """A result with no canonical encoding fails that invocation (tool_error), naming both."""
    result = run(unencodable_wf, {"i": 1})
    inv = result.invocations[0]
    assert inv.status == "failed" and inv.reason == "tool_error"
    assert "TypeError" in inv.error and "'t.unencodable'" in inv.error
    assert "builtins.object" in inv.error
    assert result.store.get_entry(inv.address) is None


@step(name="t.wrong_return")
async def wrong_return(context: StepContext, i: int) -> str:
    return i  # type: ignore[return-value]


@workflow(name="t.wrong_return_wf")
async def wrong_return_wf(context: WorkflowContext, i: ScalarHandle[int]) -> ScalarHandle[str]:
    return context.run_step("w", wrong_return, {"i": i})


def test_result_of_wrong_type_fails_the_invocation():
    """A step returning another type than declared fails, naming both types."""
    inv = run(wrong_return_wf, {"i": 1}).invocations[0]
    assert inv.status == "failed"
    assert "returned int 1, but its signature says '-> str'" in inv.error


@workflow(name="t.observe_failed")
async def observe_failed(context: WorkflowContext, i: ScalarHandle[int]) -> ScalarHandle[int]:
    first = context.run_step("t", times_out, {"i": i})
    await first.observe()
    return first


def test_observing_a_failed_handle_skips_the_workflow_and_fails_the_job():
    """Uncaught UpstreamFailedError ends the workflow skipped and the job failed, no raise."""
    result = run(observe_failed, {"i": 1})
    assert result.status == "failed"
    assert result.workflows[0].status == "skipped"
    assert "UpstreamFailedError" in result.workflows[0].error


@workflow(name="t.catches")
async def catches(context: WorkflowContext, i: ScalarHandle[int]) -> ScalarHandle[str]:
    first = context.run_step("t", times_out, {"i": i})
    try:
        await first.item()
    except UpstreamFailedError:
        return context.run_step("fallback", needs_str, {"text": "fallback"})
    raise AssertionError("unreachable")


def test_upstream_failure_can_be_caught_in_the_body():
    """A body that catches UpstreamFailedError goes on scheduling."""
    result = run(catches, {"i": 1})
    assert result.status == "failed"  # the timed-out step still failed
    assert result.invocation("t.catches/fallback").status == "succeeded"


@workflow(name="t.raises")
async def raises(context: WorkflowContext, i: ScalarHandle[int]) -> ScalarHandle[int]:
    context.run_step("n", slow, {"x": i})
    raise RuntimeError("body bug")


def test_body_exception_cancels_in_flight_steps_and_propagates():
    """A body's own exception propagates out of launch and cancels in-flight steps."""
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="body bug"):
        run(raises, {"i": 1})
    assert time.perf_counter() - start < SLOW / 2


class Doc(Entity):
    text: str


@step(name="t.upper")
async def upper(context: StepContext, doc: Doc, ref: BoundID[Doc]) -> Doc:
    assert isinstance(doc, Doc) and isinstance(ref, BoundID)
    assert (await context.load(ref)) == doc
    return Doc(text=doc.text.upper())


@workflow(name="t.entities")
async def entities_wf(
    context: WorkflowContext, doc: ScalarHandle[BoundID[Doc]]
) -> ScalarHandle[Doc]:
    return context.run_step("upper", upper, {"doc": doc, "ref": doc})


def test_entities_are_loaded_or_passed_as_references_by_annotation():
    """`Doc` receives the object, `BoundID[Doc]` the reference; entity results are stored."""
    result = run(entities_wf, {"doc": Doc(text="hi")})
    assert result.status == "succeeded"
    assert result.output.item() == Doc(text="HI")


@step(name="t.pair")
async def pair(context: StepContext, a: str, b: int) -> str:
    return f"{a}{b}"


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.sampled_from("xyz"), min_size=1, max_size=3, unique=True),
    st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True),
    st.sampled_from([("m", "n"), ("n", "m"), ("m",), ("n",)]),
)
def test_map_over_gives_exactly_the_product(tmp_path_factory, akeys, bkeys, map_over):
    """The result's dims are map_over then the callee's; no work is dropped or duplicated."""

    @workflow(name=f"t.prop.{'_'.join(map_over)}")
    async def wf(
        context: WorkflowContext,
        a: Annotated[ArrayHandle[str], "[m: str]"],
        b: Annotated[ArrayHandle[int], "[n: int]"],
    ) -> ScalarHandle[Any]:
        if map_over == ("m",):
            h = context.run_step("p", pair_first, {"a": a, "b": b}, map_over=list(map_over))
        elif map_over == ("n",):
            h = context.run_step("p", pair_second, {"a": a, "b": b}, map_over=list(map_over))
        else:
            h = context.run_step("p", pair, {"a": a, "b": b}, map_over=list(map_over))
        return context.add_source_array("dims", Array.scalar(list(h.dims)))

    a = Array.from_mapping({k: k for k in akeys}, dims=["m"], value_type=str)
    b = Array.from_mapping({k: k for k in bkeys}, dims=["n"], value_type=int)
    store = tmp_path_factory.mktemp("s")
    result = run(wf, {"a": a, "b": b}, store=store, verify=False)
    invs = [i.address for i in result.invocations]
    assert len(invs) == len(set(invs))
    n = {"m": len(akeys), "n": len(bkeys)}
    assert len(invs) == (n["m"] * n["n"] if len(map_over) == 2 else n[map_over[0]])
    own = ["n"] if map_over == ("m",) else []  # pair_first returns an array over n
    assert result.output.item() == [*map_over, *own]


@step(name="t.pair_first")
async def pair_first(
    context: StepContext, a: str, b: Annotated[Array[int], "[n: int]"]
) -> Annotated[Array[str], "[n: int]"]:
    return b.map(lambda v: f"{a}{v}", str)


@step(name="t.pair_second")
async def pair_second(context: StepContext, a: Annotated[Array[str], "[m: str]"], b: int) -> str:
    return ",".join(f"{v}{b}" for v in a.values())


@workflow(name="t.grid")
async def grid(
    context: WorkflowContext,
    a: Annotated[ArrayHandle[str], "[m: str]"],
    b: Annotated[ArrayHandle[int], "[n: int]"],
) -> Annotated[ArrayHandle[str], "[n: int, m: str]"]:
    first = context.run_step("first", pair_first, {"a": a, "b": b}, map_over=["m"])
    return context.run_step("both", pair, {"a": first, "b": b}, map_over=["n", "m"])


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.sampled_from("xyzw"), min_size=1, max_size=3, unique=True),
    st.lists(st.integers(0, 9), min_size=1, max_size=3, unique=True),
)
def test_broadcast_and_own_dims_values_are_right(tmp_path_factory, akeys, bkeys):
    """A step's own result dims follow the mapped ones; every cell holds its own value."""
    a = Array.from_mapping({k: k for k in akeys}, dims=["m"], value_type=str)
    b = Array.from_mapping({k: k for k in bkeys}, dims=["n"], value_type=int)
    result = run(grid, {"a": a, "b": b}, store=tmp_path_factory.mktemp("s"))
    out = result.output
    assert out.dims == ("n", "m")
    for n, m in itertools.product(bkeys, akeys):
        assert out[n, m] == f"{m}{n}{n}"


@workflow(name="t.combine_stack")
async def combine_stack(
    context: WorkflowContext,
    a: Annotated[ArrayHandle[str], "[m: str]"],
    b: Annotated[ArrayHandle[str], "[m: str]"],
) -> Annotated[ArrayHandle[str], "[which: str, m: str]"]:
    both = await context.combine({"a": a, "b": b}).observe()
    assert both["x"] == {"a": "x", "b": "X"}
    return context.stack({"first": a, "second": b}, dim="which")


def test_combine_and_stack():
    """combine pairs values up; stack adds a leading dimension."""
    a = Array.from_mapping({"x": "x", "y": "y"}, dims=["m"], value_type=str)
    b = Array.from_mapping({"x": "X", "y": "Y"}, dims=["m"], value_type=str)
    result = run(combine_stack, {"a": a, "b": b})
    assert result.output.to_dict() == {
        "first": {"x": "x", "y": "y"},
        "second": {"x": "X", "y": "Y"},
    }


def test_run_works_inside_a_running_event_loop():
    """run() from async code (a running loop) still works."""

    async def main():
        return run(evaluate, qa_inputs())

    assert asyncio.run(main()).status == "succeeded"


@pytest.mark.asyncio
async def test_launch_is_async():
    """launch() is awaitable from pytest-asyncio tests."""
    result = await launch(evaluate, qa_inputs())
    assert result.status == "succeeded"


@workflow(name="t.map_str.child")
async def map_str_child(context: WorkflowContext, a: ScalarHandle[str]) -> ScalarHandle[str]:
    return context.run_step("p", pair, {"a": a, "b": 1})


@workflow(name="t.map_str")
async def map_str_wf(
    context: WorkflowContext, a: Annotated[ArrayHandle[str], "[model: str]"]
) -> ScalarHandle[Any]:
    step_handle = context.run_step("s", pair, {"a": a, "b": 2}, map_over="model")
    child_handle = context.run_child_workflow("c", map_str_child, {"a": a}, map_over="model")
    return context.add_source_array(
        "dims", Array.scalar([list(step_handle.dims), list(child_handle.dims)])
    )


def test_map_over_a_single_name_given_as_a_str_is_that_dimension():
    """``map_over="model"`` maps over the dimension ``model`` (for steps and child workflows),
    not over the letters m, o, d, e, l."""
    a = Array.from_mapping({"x": "x", "y": "y"}, dims=["model"], value_type=str)
    result = run(map_str_wf, {"a": a})
    assert result.status == "succeeded", [i.error for i in result.invocations]
    assert result.output.item() == [["model"], ["model"]]
    assert sorted(i.address for i in result.invocations) == [
        "t.map_str/c[model=x]/p",
        "t.map_str/c[model=y]/p",
        "t.map_str/s[model=x]",
        "t.map_str/s[model=y]",
    ]


@step(name="t.blocks")
async def blocks_the_loop(context: StepContext, how: str) -> str:
    if how == "time.sleep":
        time.sleep(1.6)  # the mistake the watchdog names
    elif how.startswith("short"):
        time.sleep(0.03)  # short, but 60 of them back to back would hold the loop for 1.8 s
    else:
        await asyncio.sleep(1.6)  # waiting politely: not named
    return how


@workflow(name="t.blocking")
async def blocking_wf(
    context: WorkflowContext, how: Annotated[ArrayHandle[str], "[how: str]"]
) -> Annotated[ArrayHandle[str], "[how: str]"]:
    return context.run_step("b", blocks_the_loop, {"how": how}, map_over="how")


def test_a_step_that_blocks_the_event_loop_is_named_while_it_blocks(caplog):
    """One WARNING on the fxtr logger names the step and address that blocks the loop (and
    says what to do); a step that awaits for as long is not named."""
    how = Array.from_mapping(
        {"sleep": "time.sleep", "await": "asyncio.sleep"}, dims=["how"], value_type=str
    )
    caplog.set_level(logging.WARNING, logger="fxtr")
    started = time.monotonic()
    result = run(blocking_wf, {"how": how})
    assert result.status == "succeeded"
    assert time.monotonic() - started < 10
    named = [r for r in caplog.records if "blocked the event loop" in r.getMessage()]
    assert len(named) == 1, [r.getMessage() for r in caplog.records]
    (record,) = named
    assert record.levelno == logging.WARNING and record.name == "fxtr"
    message = record.getMessage()
    assert "'t.blocks' at 't.blocking/b[how=sleep]'" in message
    assert "asyncio.to_thread" in message
    seconds = float(message.split("for ")[1].split(" s")[0])
    assert 1.0 <= seconds < 1.6


def test_short_steps_run_back_to_back_let_the_loop_beat_and_are_not_named(
    caplog, monkeypatch, tmp_path
):
    """Workers of steps that never suspend yield to the loop (its other tasks keep running),
    and when the loop is held by many short steps, none of them is named as the blocker."""
    from fxtr.experiment import _resolution

    shorts = {f"{k}": f"short{k}" for k in range(60)}
    inputs = {"how": Array.from_mapping(shorts, dims=["how"], value_type=str)}
    caplog.set_level(logging.WARNING, logger="fxtr")

    async def with_ticker(store: str) -> tuple[Any, float]:
        gaps, last = [0.0], time.monotonic()

        async def tick() -> None:
            nonlocal last
            while True:
                await asyncio.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        ticker = asyncio.create_task(tick())
        result = await launch(blocking_wf, inputs, store=store, concurrency=1)
        ticker.cancel()
        return result, max(gaps)

    result, longest = asyncio.run(with_ticker(str(tmp_path / "a")))
    assert result.status == "succeeded"
    assert longest < 0.9, f"the loop went {longest:.2f} s without a turn"

    monkeypatch.setattr(_resolution, "YIELD_AFTER", 3600.0)  # the loop is held for 1.8 s
    result, longest = asyncio.run(with_ticker(str(tmp_path / "b")))
    assert result.status == "succeeded" and longest > 1.0
    assert not [r for r in caplog.records if "blocked the event loop" in r.getMessage()]
