"""Hermeticity notices: what bodies read and write outside their inputs and results."""

from __future__ import annotations

import importlib
import os

from fxtr import ScalarHandle, StepContext, WorkflowContext, run, step, workflow


@step(name="t.leaky")
async def leaky(context: StepContext, path: str) -> str:
    with open(path) as f:
        text = f.read()
    with open(path + ".out", "w") as f:
        f.write(text)
    os.environ.get("OPENAI_API_KEY")  # credentials are fine
    importlib.import_module("json")  # imports are fine
    return text + os.environ.get("FXTR_TEST_MODE_SETTING_X", "") + os.getenv("MY_SETTING", "-")


@workflow(name="t.leaky_wf")
async def leaky_wf(context: WorkflowContext, path: ScalarHandle[str]) -> ScalarHandle[str]:
    os.environ.get("WORKFLOW_KNOB")
    return context.run_step("leak", leaky, {"path": path})


def test_files_read_and_written_and_environment_are_noticed(tmp_path, monkeypatch):
    """Reading a file, writing one and reading a setting are warnings on the record."""
    monkeypatch.setenv("MY_SETTING", "on")
    data = tmp_path / "data.txt"
    data.write_text("hello")
    result = run(leaky_wf, {"path": str(data)})
    assert result.status == "succeeded"
    warnings = result.invocations[0].warnings
    assert any("read local file" in w and "data.txt" in w for w in warnings)
    assert any("wrote file" in w and "data.txt.out" in w for w in warnings)
    assert any("environment variable 'MY_SETTING'" in w for w in warnings)
    assert not any("OPENAI_API_KEY" in w or "FXTR_" in w for w in warnings)
    assert not any(".py" in w for w in warnings)
    assert any("'WORKFLOW_KNOB'" in w for w in result.workflows[0].warnings)


def test_notices_are_in_the_stored_record(tmp_path):
    """The notices are durable with the invocation."""
    data = tmp_path / "data.txt"
    data.write_text("x")
    result = run(leaky_wf, {"path": str(data)})
    stored = result.store.job_invocations(result.job_id)
    assert stored["t.leaky_wf/leak"]["warnings"]


def test_hermetic_false_turns_notices_off(tmp_path):
    """With hermetic=False nothing is noticed."""
    data = tmp_path / "data.txt"
    data.write_text("x")
    result = run(leaky_wf, {"path": str(data)}, hermetic=False)
    assert result.invocations[0].warnings == []


def test_engine_work_and_launcher_code_are_not_noticed(tmp_path):
    """Reading files in the launcher, around a job, leaves no notice on any record."""
    data = tmp_path / "data.txt"
    data.write_text("x")
    data.read_text()  # the launcher reads its data: fine
    result = run(leaky_wf, {"path": str(data)})
    data.read_text()
    notices = [w for i in result.invocations for w in i.warnings]
    assert sum("read local file" in w for w in notices) == 1
