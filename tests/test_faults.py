"""The engine under faults (issue 15): steps that raise what tasks do not usually raise."""

from __future__ import annotations

import asyncio
from typing import Annotated

import pytest

from fxtr import Array, ArrayHandle, StepContext, WorkflowContext, resume, run, step, workflow
from fxtr.store import open_store

RAISE: dict[str, BaseException] = {}
RAN: list[str] = []


@pytest.fixture(autouse=True)
def _reset():
    RAISE.clear()
    RAN.clear()
    yield
    RAISE.clear()


@step(name="f.work")
async def work(context: StepContext, item: str) -> str:
    RAN.append(context.address)
    await asyncio.sleep(0)
    if item in RAISE:
        raise RAISE[item]
    return item.upper()


@workflow(name="f.all")
async def all_items(
    context: WorkflowContext, items: Annotated[ArrayHandle[str], "[item: str]"]
) -> Annotated[ArrayHandle[str], "[item: str]"]:
    return context.run_step("work", work, {"item": items}, map_over=["item"])


def _items(*names: str) -> Array[str]:
    return Array.from_mapping({n: n for n in names}, dims=["item"], value_type=str)


@pytest.mark.parametrize(
    "error",
    [asyncio.CancelledError("gave up"), KeyboardInterrupt("ctrl-c in the body"), SystemExit(3)],
    ids=["CancelledError", "KeyboardInterrupt", "SystemExit"],
)
def test_a_step_raising_a_base_exception_fails_only_its_invocation(error):
    """Recorded as a failed invocation; the job is failed; verification stays quiet."""
    RAISE["b"] = error
    result = run(all_items, {"items": _items("a", "b", "c")})  # verify=True by default
    assert result.status == "failed"
    failed = result.invocation("f.all/work[item=b]")
    assert failed.status == "failed"
    assert failed.error.startswith(type(error).__name__)
    assert failed.traceback and type(error).__name__ in failed.traceback
    assert {i.address: i.status for i in result.invocations} == {
        "f.all/work[item=a]": "succeeded",
        "f.all/work[item=b]": "failed",
        "f.all/work[item=c]": "succeeded",
    }
    record = open_store(".fxtr").get_job(result.job_id)
    assert record["attempts"][-1]["status"] == "failed"
    RAISE.clear()
    RAN.clear()
    again = asyncio.run(resume(result.job_id))
    assert again.status == "succeeded"
    assert RAN == ["f.all/work[item=b]"]


def test_cancelling_the_job_still_cancels_its_steps():
    """A cancellation from outside is not mistaken for a step's own CancelledError."""

    @step(name="f.slow")
    async def slow(context: StepContext, item: str) -> str:
        await asyncio.sleep(30)
        return item

    @workflow(name="f.slow_all")
    async def slow_all(
        context: WorkflowContext, items: Annotated[ArrayHandle[str], "[item: str]"]
    ) -> Annotated[ArrayHandle[str], "[item: str]"]:
        return context.run_step("slow", slow, {"item": items}, map_over=["item"])

    from fxtr import launch

    async def main() -> None:
        task = asyncio.ensure_future(launch(slow_all, {"items": _items("a", "b")}))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(main(), 10))
    (record,) = open_store(".fxtr").iter_jobs()
    attempt = record["attempts"][-1]
    assert attempt["status"] == "interrupted"  # stopped from outside: not an error of its own
    assert sorted(attempt["in_flight"]) == ["f.slow_all/slow[item=a]", "f.slow_all/slow[item=b]"]


def test_a_result_the_store_cannot_hold_fails_only_its_invocation():
    """A lone surrogate cannot be stored: that invocation fails, the others are kept."""

    @step(name="f.text")
    async def text(context: StepContext, item: str) -> str:
        return "bad \ud800 text" if item == "b" else item.upper()

    @workflow(name="f.texts")
    async def texts(
        context: WorkflowContext, items: Annotated[ArrayHandle[str], "[item: str]"]
    ) -> Annotated[ArrayHandle[str], "[item: str]"]:
        return context.run_step("text", text, {"item": items}, map_over=["item"])

    names = [f"i{n}" for n in range(20)] + ["b"]
    result = run(texts, {"items": _items(*names)}, verify=False)
    assert result.status == "failed"
    bad = result.invocation("f.texts/text[item=b]")
    assert bad.status == "failed"
    assert "'f.text'" in bad.error and "f.texts/text[item=b]" in bad.error
    assert "could not be stored" in bad.error
    store = open_store(".fxtr")
    kept = store.get_entries([f"f.texts/text[item={n}]" for n in names])
    assert set(kept) == {f"f.texts/text[item=i{n}]" for n in range(20)}
    records = store.job_invocations(result.job_id)
    assert records["f.texts/text[item=b]"]["status"] == "failed"
    assert sum(r["status"] == "succeeded" for r in records.values()) == 20
    assert store.claim(["f.texts/text[item=b]"], "someone-else", 5) == {
        "f.texts/text[item=b]": None
    }  # the claim was released


def test_a_garbled_store_is_one_clear_error_naming_the_path(tmp_path):
    """Bytes that are not a SQLite database: launch says which file and what to do."""
    from fxtr.store import StoreError

    store = tmp_path / "store"
    (store / "cache").mkdir(parents=True)
    (store / "cache" / "cache.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError) as info:
        run(all_items, {"items": _items("a")}, store=store)
    message = str(info.value)
    assert str(store / "cache" / "cache.db") in message
    assert "Move" in message and "another store" in message
