"""Job records, resume, determinism verification, and durability under SIGKILL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fxtr import (
    DeterminismError,
    ScalarHandle,
    StepContext,
    WorkflowContext,
    resume,
    run,
    step,
    workflow,
)
from fxtr.experiment.jobs import verify
from fxtr.store import Batch, open_store
from tests import examples
from tests.examples import evaluate, qa_inputs

GOLDEN = Path(__file__).parent / "golden"


def test_record_keeps_workflow_inputs_commit_and_attempts():
    """The job record names the root workflow, its importable path, inputs and attempts."""
    result = run(evaluate, qa_inputs())
    record = open_store(".fxtr").get_job(result.job_id)
    assert record["workflow"] == "qa.evaluate"
    assert record["workflow_path"] == "tests.examples:evaluate"
    assert set(record["inputs"]) == {"prompts", "models"}
    assert "commit" in record and "dirty" in record
    assert [a["status"] for a in record["attempts"]] == ["succeeded"]
    invs = open_store(".fxtr").job_invocations(result.job_id)
    assert len(invs) == 10
    assert all(r["status"] == "succeeded" for r in invs.values())


def test_resume_reruns_exactly_the_failed_line_of_work():
    """Attempt 2 runs only the failed invocation and what it blocked."""
    examples.FAIL.add("capital of france")
    first = run(evaluate, qa_inputs(models=("a",)))
    assert first.status == "failed"
    examples.FAIL.clear()
    examples.CALLS.clear()
    second = asyncio.run(resume(first.job_id))
    assert second.job_id == first.job_id
    assert second.attempt == 2
    assert second.status == "succeeded"
    assert sorted(examples.CALLS) == [
        "qa.evaluate/answer[model=a,prompt=p2]",
        "qa.evaluate/score[model=a,prompt=p2]",
        "qa.evaluate/summarize[model=a]/mean",
    ]
    reused = [i for i in second.invocations if i.from_cache]
    assert {i.address for i in reused} == {
        "qa.evaluate/answer[model=a,prompt=p1]",
        "qa.evaluate/score[model=a,prompt=p1]",
    }
    assert second.output.to_dict() == {"a": 1.0}
    assert [a["status"] for a in open_store(".fxtr").get_job(first.job_id)["attempts"]] == [
        "failed",
        "succeeded",
    ]


def test_resume_of_an_unknown_job_names_the_store():
    """An unknown job id is a KeyError naming the store."""
    with pytest.raises(KeyError, match="No job 'nope' in the store at .*\\.fxtr"):
        asyncio.run(resume("nope"))


COUNTER = {"n": 0}


@step(name="t.echo")
async def echo(context: StepContext, x: int) -> int:
    return x


@workflow(name="t.renaming")
async def renaming(context: WorkflowContext, x: ScalarHandle[int]) -> ScalarHandle[int]:
    COUNTER["n"] += 1
    return context.run_step(f"echo_{COUNTER['n']}", echo, {"x": x})


def test_name_that_changes_between_body_runs_is_caught():
    """A name that differs on replay raises DeterminismError with both operations."""
    COUNTER["n"] = 0
    with pytest.raises(DeterminismError) as info:
        run(renaming, {"x": 1})
    msg = str(info.value)
    assert "Workflow 't.renaming' is not deterministic" in msg
    assert "schedules 'echo_2' (step t.echo), which the record lacks" in msg
    assert "the record has 'echo_1' (step t.echo) instead?" in msg
    assert "Move randomness, time and I/O into a step" in msg


def test_verify_false_skips_the_replay():
    """verify=False does not replay, so the same body passes."""
    COUNTER["n"] = 0
    assert run(renaming, {"x": 1}, verify=False).status == "succeeded"


CLOCK = {"t": 0.0}


@workflow(name="t.branch_on_time")
async def branch_on_time(context: WorkflowContext, x: ScalarHandle[int]) -> ScalarHandle[int]:
    now = CLOCK["t"] or time.time()
    CLOCK["t"] = now + 1  # the clock moves between the attempt and its replay
    if int(now) % 2 == 0:
        return context.run_step("even", echo, {"x": x})
    return context.run_step("odd", echo, {"x": x})


def test_branch_on_time_is_caught():
    """A body branching on the clock schedules differently on replay and is caught."""
    CLOCK["t"] = 0.0
    with pytest.raises(DeterminismError, match="'even'|'odd'"):
        run(branch_on_time, {"x": 1})


@workflow(name="t.extra_op")
async def extra_op(context: WorkflowContext, x: ScalarHandle[int]) -> ScalarHandle[int]:
    COUNTER["n"] += 1
    first = context.run_step("a", echo, {"x": x})
    if COUNTER["n"] > 1:
        context.run_step("b", echo, {"x": x})
    return first


def test_extra_operation_on_replay_is_caught():
    """A replay that schedules more than the record is not deterministic."""
    COUNTER["n"] = 0
    with pytest.raises(DeterminismError, match="schedules 'b' .*which the record lacks"):
        run(extra_op, {"x": 1})


@workflow(name="t.changing_input")
async def changing_input(context: WorkflowContext, x: ScalarHandle[int]) -> ScalarHandle[int]:
    COUNTER["n"] += 1
    return context.run_step("a", echo, {"x": COUNTER["n"]})


def test_different_inputs_on_replay_are_caught():
    """Same name, different constant input: the diff names the inputs."""
    COUNTER["n"] = 0
    with pytest.raises(DeterminismError, match="Differences: inputs: recorded"):
        run(changing_input, {"x": 1})


def _load_golden(name: str, store_path: Path) -> str:
    data = json.loads((GOLDEN / name).read_text())
    store = open_store(store_path)
    store.put_job(data["job"])
    store.put_ops(data["job"]["job_id"], len(data["job"]["attempts"]), data["ops"])
    store.write(
        Batch(entities=data["entities"], invocations={data["job"]["job_id"]: data["invocations"]})
    )
    return data["job"]["job_id"]


def test_golden_record_replays(tmp_path):
    """A checked-in record of qa.evaluate replays against today's code."""
    job_id = _load_golden("qa_evaluate.json", tmp_path)
    asyncio.run(verify(job_id, store=tmp_path))


def test_broken_golden_record_raises(tmp_path):
    """The same record with one operation renamed raises DeterminismError with a diff."""
    job_id = _load_golden("qa_evaluate_broken.json", tmp_path)
    with pytest.raises(DeterminismError) as info:
        asyncio.run(verify(job_id, store=tmp_path))
    msg = str(info.value)
    assert "schedules 'score' (step qa.score), which the record lacks" in msg
    assert "the record has 'scores' (step qa.score) instead?" in msg


KILL_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from typing import Annotated
    from fxtr import Array, ArrayHandle, StepContext, WorkflowContext, run, step, workflow

    @step(name="kill.work")
    async def work(context: StepContext, i: int) -> int:
        await asyncio.sleep(0.1 + (i % 4) * 0.05)
        print(f"done {i}", flush=True)
        return i * i

    @workflow(name="kill.wf")
    async def wf(context: WorkflowContext,
                 items: Annotated[ArrayHandle[int], "[i: int]"]) -> Annotated[ArrayHandle[int], "[i: int]"]:
        return context.run_step("work", work, {"i": items}, map_over=["i"])

    items = Array.from_mapping({i: i for i in range(40)}, dims=["i"], value_type=int)
    print(run(wf, {"items": items}, store=sys.argv[1], concurrency=4).status, flush=True)
    """
)


def test_sigkill_mid_job_loses_at_most_what_was_in_flight(tmp_path):
    """After SIGKILL, a new launch reruns at most the invocations that had not completed."""
    script = tmp_path / "kill.py"
    script.write_text(KILL_SCRIPT)
    store_path = tmp_path / "store"
    done = []
    with subprocess.Popen(
        [sys.executable, str(script), str(store_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent.parent,
    ) as proc:
        while len(done) < 12:
            line = proc.stdout.readline()
            assert line, "the job ended before it could be killed"
            done.append(line)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    completed_before_kill = len(done)
    store = open_store(store_path)
    stored = [a for a, _ in store.iter_entries()]
    # everything that completed before the last event-loop turn is durable
    assert len(stored) >= completed_before_kill - 4
    second = subprocess.run(
        [sys.executable, str(script), str(store_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parent.parent,
    )
    assert second.stdout.strip().endswith("succeeded")
    reran = [line for line in second.stdout.splitlines() if line.startswith("done")]
    assert len(reran) == 40 - len(stored)
    assert len(reran) <= 40 - completed_before_kill + 4


def test_root_is_the_first_segment_of_every_address_and_resume_keeps_it():
    """launch(root=...) roots every address; the record keeps it; resume and verify use it."""
    examples.FAIL.add("capital of france")
    first = run(evaluate, qa_inputs(models=("a",)), root="evals.test_qa::test_qa")
    assert first.status == "failed"
    assert {i.address.split("/")[0] for i in first.invocations} == {"evals.test_qa::test_qa"}
    assert first.workflows[0].address == "evals.test_qa::test_qa"
    assert open_store(".fxtr").get_job(first.job_id)["root"] == "evals.test_qa::test_qa"
    examples.FAIL.clear()
    examples.CALLS.clear()
    second = asyncio.run(resume(first.job_id))
    assert second.status == "succeeded"
    assert sorted(examples.CALLS) == [
        "evals.test_qa::test_qa/answer[model=a,prompt=p2]",
        "evals.test_qa::test_qa/score[model=a,prompt=p2]",
        "evals.test_qa::test_qa/summarize[model=a]/mean",
    ]
    asyncio.run(verify(first.job_id))
    with pytest.raises(ValueError, match="start with 'evals.test_qa::test_qa'"):
        asyncio.run(resume(first.job_id, root="other"))


@pytest.mark.parametrize("root", ["", "a/b", "x[1]", 3])
def test_a_bad_root_is_refused(root):
    with pytest.raises(ValueError, match="root="):
        run(evaluate, qa_inputs(), root=root)


@workflow(name="t.defaulted")
async def defaulted(context: WorkflowContext, x: int, times: int = 3) -> ScalarHandle[int]:
    return context.run_step("echo", echo, {"x": x * times})


def test_workflow_parameters_with_a_default_may_be_left_out():
    assert run(defaulted, {"x": 2}).output.item() == 6
    assert run(defaulted, {"x": 2, "times": 5}, conflict="overwrite").output.item() == 10
