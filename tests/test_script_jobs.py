"""Jobs launched outside pytest, as `python job.py` (issue 40 item 7).

The workflow is `__main__:evaluate` in the record; `fxtr resume` (another process, another
directory) loads the script by its path, its folder on sys.path, without running its
`if __name__ == "__main__":` block. And a step fed by a child workflow's result depends on
the steps inside the child that made it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.test_resume_imports import fxtr_cmd

JOB = textwrap.dedent(
    """
    import os, pathlib
    from typing import Annotated

    import helper  # next to the script: importable only with the script's folder on sys.path
    from fxtr import ArrayHandle, ScalarHandle, StepContext, WorkflowContext, run, step, workflow
    from fxtr.experiment.arrays import Array

    @step(name="job.score")
    async def score(context: StepContext, case: str) -> float:
        if os.environ.get("FAIL") == case:
            raise RuntimeError(f"the scorer of {case} is down")
        return helper.value(case)

    @step(name="job.mean")
    async def mean(context: StepContext, scores: Annotated[Array[float], "[case: str]"]) -> float:
        values = [v for _, v in scores.items()]
        return sum(values) / len(values)

    @workflow(name="job.summarize")
    async def summarize(
        context: WorkflowContext, scores: Annotated[ArrayHandle[float], "[case: str]"]
    ) -> ScalarHandle[float]:
        return context.run_step("mean", mean, {"scores": scores})

    @step(name="job.report")
    async def report(context: StepContext, m: float) -> str:
        return f"mean {m:.3f}"

    @workflow(name="job.evaluate")
    async def evaluate(
        context: WorkflowContext, case: Annotated[ArrayHandle[str], "[case: str]"]
    ) -> ScalarHandle[str]:
        scores = context.run_step("score", score, {"case": case}, map_over=["case"])
        m = context.run_child_workflow("summarize", summarize, {"scores": scores})
        return context.run_step("report", report, {"m": m})

    if __name__ == "__main__":
        with pathlib.Path(__file__).with_name("main_ran.txt").open("a") as f:
            f.write("ran\\n")
        cases = Array.from_mapping({c: c for c in ("a", "b", "c")}, dims=["case"])
        result = run(evaluate, {"case": cases}, store=str(pathlib.Path(__file__).parent / ".fxtr"))
        print(result.job_id, result.status)
    """
)


def _project(root: Path) -> Path:
    folder = root / "project"
    folder.mkdir()
    (folder / "job.py").write_text(JOB)
    (folder / "helper.py").write_text(
        'def value(case):\n    return {"a": 1.0, "b": 0.0, "c": 0.5}[case]\n'
    )
    return folder


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FAIL", "PYTHONPATH")}
    env.update(extra)
    return env


def _launch(folder: Path) -> subprocess.CompletedProcess[str]:
    """`python job.py` in its folder, case b's scorer down."""
    command = [sys.executable, "job.py"]
    return subprocess.run(
        command, cwd=folder, capture_output=True, text=True, timeout=120, env=_env(FAIL="b")
    )


def test_a_script_job_resumes_from_its_script_without_its_main_block(tmp_path):
    """`python job.py` fails one case; `fxtr resume` from elsewhere finishes the job."""
    folder = _project(tmp_path)
    launched = _launch(folder)
    assert launched.returncode == 0, launched.stderr
    job_id, status = launched.stdout.split()
    assert status == "failed"
    from fxtr.store import open_store

    record = open_store(folder / ".fxtr").get_job(job_id)
    assert record["workflow_path"] == "__main__:evaluate"
    assert record["origin"] == {"kind": "script", "script": str(folder / "job.py")}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    resumed = fxtr_cmd(elsewhere, "resume", job_id, "--store", str(folder / ".fxtr"), env=_env())
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"job {job_id} · attempt 2 · succeeded · 3 ran, 0 failed" in resumed.stdout
    # the main block ran once, at launch: loading the script to resume did not run it
    assert (folder / "main_ran.txt").read_text() == "ran\n"
    shown = fxtr_cmd(elsewhere, "show", job_id, "--store", str(folder / ".fxtr"), env=_env())
    assert "attempt 2 · succeeded" in shown.stdout.splitlines()[0]


def test_a_script_whose_file_is_gone_is_a_clear_error(tmp_path):
    folder = _project(tmp_path)
    launched = _launch(folder)
    job_id = launched.stdout.split()[0]
    (folder / "job.py").rename(folder / "moved.py")
    resumed = fxtr_cmd(tmp_path, "resume", job_id, "--store", str(folder / ".fxtr"), env=_env())
    assert resumed.returncode == 1
    assert str(folder / "job.py") in resumed.stderr and "Restore it" in resumed.stderr


def test_a_step_fed_by_a_child_workflow_depends_on_the_steps_that_made_its_result(tmp_path):
    """report takes summarize's result: its node depends on summarize/mean, which depends
    on the score cells."""
    folder = _project(tmp_path)
    sys.path.insert(0, str(folder))
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location("script_job_graph", folder / "job.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        from fxtr import run
        from fxtr.experiment.arrays import Array

        cases = Array.from_mapping({c: c for c in ("a", "b", "c")}, dims=["case"])
        result = run(module.evaluate, {"case": cases}, store=tmp_path / ".fxtr")
    finally:
        sys.path.remove(str(folder))
    assert result.status == "succeeded"
    depends = {n.id: n.depends_on for n in result.graph.nodes if n.kind == "step"}
    assert depends["job.evaluate/report"] == ["job.evaluate/summarize/mean"]
    assert sorted(depends["job.evaluate/summarize/mean"]) == [
        f"job.evaluate/score[case={c}]" for c in ("a", "b", "c")
    ]


def test_a_script_without_a_main_block_is_refused_not_run_again(tmp_path):
    """Loading a script whose launch is at its top level would launch again: refused."""
    folder = _project(tmp_path)
    script = folder / "job.py"
    guarded = 'if __name__ == "__main__":\n'
    text = script.read_text()
    head, _, block = text.partition(guarded)
    script.write_text(head + textwrap.dedent(block))  # the launch at the top level
    launched = _launch(folder)
    assert launched.returncode == 0, launched.stderr
    job_id = launched.stdout.split()[0]
    resumed = fxtr_cmd(tmp_path, "resume", job_id, "--store", str(folder / ".fxtr"), env=_env())
    assert resumed.returncode == 1
    assert "if __name__" in resumed.stderr and "Put the launch under that block" in resumed.stderr
    assert (folder / "main_ran.txt").read_text() == "ran\n"  # not launched a second time
    from fxtr.store import open_store

    assert len(list(open_store(folder / ".fxtr").iter_jobs())) == 1


AGENT_JOB = textwrap.dedent(
    '''
    import os
    from fxtr import run
    from fxtr.agents import Agent, tool, tool_call
    from fxtr.evals import Case, evaluate, includes, register_mock, user_text
    from fxtr.experiment.arrays import Array
    from fxtr.models import ToolMessage

    @tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        if os.environ.get("FAIL") == str(int(a)):
            raise SystemExit("the machine went away")  # not the tool's answer: the step fails
        return a + b

    def calc(request):
        if isinstance(request.context[-1], ToolMessage):
            return "It is " + request.context[-1].results[0].content
        a, b = user_text(request).split("+")
        return tool_call("add", a=float(a), b=float(b))

    MODEL = register_mock("script-calc", calc)
    CASES = [Case(id=f"c{k}", input=f"{k}+1", target=f"{k + 1}.0") for k in range(3)]

    if __name__ == "__main__":
        inputs = {
            "model": Array.from_mapping({MODEL.name: MODEL}, dims=["model"]),
            "case": Array.from_mapping({c.id: c for c in CASES}, dims=["case"]),
            "scorer": includes(),
            "agent": Agent(tools=(add,)),
        }
        result = run(evaluate, inputs)
        print(result.job_id, result.status)
    '''
)


def test_an_agent_script_resumes_with_its_tools_and_mocks(tmp_path):
    """Tools at `__main__:add` and a mock registered by the script: `fxtr resume` elsewhere
    loads the script and finishes the job with them (the failed case answered right)."""
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "agent_job.py").write_text(AGENT_JOB)
    command = [sys.executable, "agent_job.py"]
    launched = subprocess.run(
        command, cwd=folder, capture_output=True, text=True, timeout=120, env=_env(FAIL="1")
    )
    assert launched.returncode == 0, launched.stderr
    job_id, status = launched.stdout.split()
    assert status == "failed"
    store = str(folder / ".fxtr")
    resumed = fxtr_cmd(tmp_path, "resume", job_id, "--store", store, env=_env())
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "attempt 2 · succeeded" in resumed.stdout
    from fxtr.store import open_store

    entries = [e.result for a, e in open_store(store).iter_entries() if "/tool[" in a]
    assert len(entries) == 3 and not [e for e in entries if "Error" in e]
