"""Resuming a job in another process imports what the job names, or fails, never caches
a wrong result (issue 36 item 2, issue 40 item 7).

A tool, mock or environment function that cannot be imported is the machine's fault: the
invocation fails and nothing is cached. `fxtr resume` of a job pytest launched collects the
eval's file as pytest did (rootdir, conftest, sys.path) first; a job launched as
`python job.py` is resumed from that script, loaded without its `__main__` block.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import fxtr
from fxtr.agents import Agent
from fxtr.evals import Case, evaluate, includes, register_mock
from fxtr.experiment.arrays import Array
from tests import agent_examples as ex

FXTR = Path(sys.executable).with_name("fxtr")


def fxtr_cmd(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The `fxtr` command, as a user types it in ``cwd``."""
    command = [str(FXTR)] if FXTR.exists() else [sys.executable, "-m", "fxtr.cli"]
    return subprocess.run(
        [*command, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
        env=env,
    )  # fmt: skip


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STALL", "GITHUB_STEP_SUMMARY")}
    env.pop("PYTHONPATH", None)  # the eval's folder is importable only as pytest sets it up
    env.update(extra)
    return env


# --- a tool that cannot be imported fails its invocation ----------------------------------


def test_a_tool_that_cannot_be_imported_fails_the_step_and_caches_nothing(tmp_path, monkeypatch):
    """The tool's module is gone by the time its call runs: the call fails (raised), no
    ToolResult with the LookupError is cached, and a run where the tool imports again
    computes it."""
    from fxtr.agents import _tool

    (tmp_path / "gone_tools.py").write_text(
        "from fxtr.agents import tool\n\n@tool\ndef add(a: float, b: float) -> float:\n"
        '    """Add two numbers."""\n    return a + b\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import gone_tools

    calc = register_mock("agent-calc-gone", ex.calc_script)
    cases = [Case(id="a", input="2+3", target="5")]
    inputs = {
        "model": Array.from_mapping({calc.name: calc}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": includes(),
        "agent": Agent(tools=(gone_tools.add,)),
    }
    # the machine that runs the call cannot import the tool's module
    (tmp_path / "gone_tools.py").rename(tmp_path / "moved_tools.py")
    monkeypatch.delitem(sys.modules, "gone_tools")
    monkeypatch.delitem(_tool._FUNCTIONS, "gone_tools:add")
    broken = fxtr.run(evaluate, inputs, store=tmp_path / "store")
    assert broken.status == "failed"
    (call,) = [i for i in broken.invocations if "/tool[" in i.address]
    assert call.status == "failed" and "cannot be imported" in (call.error or "")
    assert "gone_tools" in (call.error or "")
    assert broken.store.get_entry(call.address) is None
    # the same eval where the tool imports again: the call runs (it was never cached)
    (tmp_path / "moved_tools.py").rename(tmp_path / "gone_tools.py")
    fixed = fxtr.run(evaluate, inputs, store=tmp_path / "store")
    assert fixed.status == "succeeded"
    (again,) = [i for i in fixed.invocations if "/tool[" in i.address]
    assert not again.from_cache
    assert fixed.output.to_dict()[calc.name]["a"][0].value == 1.0


def test_an_environment_or_mock_that_cannot_be_imported_fails_and_caches_nothing(tmp_path):
    """The environment function's module is gone, or the mock was never registered in this
    process: the step raises (its invocation fails), nothing is cached for it, and nothing
    downstream runs on a made-up value."""
    from fxtr.evals import Model

    cases = [Case(id="a", input="2+3", target="5")]
    stepper = ex.STEPPER
    agent = Agent(tools=(ex.bump,), env="no_such_env_module:counter_env", env_code="0" * 64)
    inputs = {
        "model": Array.from_mapping({stepper.name: stepper}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": includes(),
        "agent": agent,
    }
    no_env = fxtr.run(evaluate, inputs, store=tmp_path / "env")
    envs = ("fxtr.agents.env", "fxtr.agents.environment")
    (env,) = [i for i in no_env.invocations if i.step in envs]
    assert env.status == "failed" and "no_such_env_module" in (env.error or "")
    assert no_env.store.get_entry(env.address) is None
    assert not [i for i in no_env.invocations if i.step == "fxtr.agents.turn"]
    ghost = Model("mock/never-registered-here")
    inputs = {**inputs, "agent": Agent(tools=(ex.add,)), "model": Array.from_mapping(
        {ghost.name: ghost}, dims=["model"])}  # fmt: skip
    no_mock = fxtr.run(evaluate, inputs, store=tmp_path / "mock")
    (turn,) = [i for i in no_mock.invocations if i.step == "fxtr.agents.turn"]
    assert turn.status == "failed" and "not a registered mock model" in (turn.error or "")
    assert no_mock.store.get_entry(turn.address) is None
    assert not [i for i in no_mock.invocations if i.step == "fxtr.agents.tool"]


# --- `fxtr resume` of a job pytest launched -------------------------------------------------

AGENT_EVAL = textwrap.dedent(
    '''
    import os, pathlib, time
    import pytest
    from fxtr.agents import Agent, tool, tool_call
    from fxtr.evals import Case, evaluate, includes, register_mock, user_text
    from fxtr.models import ToolMessage
    from helpers import HELPER

    @tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        if os.environ.get("STALL") == str(int(a)):
            pathlib.Path(os.environ["STALL_FLAG"]).write_text("in the tool")
            time.sleep(600)
        return a + b

    def calculator(request):
        if isinstance(request.context[-1], ToolMessage):
            return "It is " + request.context[-1].results[0].content
        a, b = user_text(request).split("+")
        return tool_call("add", a=float(a), b=float(b))

    MODEL = register_mock("resume-calc", calculator)
    CASES = [Case(id=f"c{k}", input=f"{k}+{HELPER}", target=f"{k + HELPER}.0") for k in range(10)]

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes(), "agent": Agent(tools=(add,), max_turns=3)})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", CASES)
    def test_calc(model, case, result):
        assert result[0].value == 1.0
    '''
)


def _write_project(root: Path) -> None:
    """An eval in evals/ (not importable from the root) that imports a module conftest.py
    puts on sys.path: only pytest's import setup finds everything."""
    (root / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    (root / "lib").mkdir()
    (root / "lib" / "helpers.py").write_text("HELPER = 1\n")
    (root / "conftest.py").write_text(
        "import pathlib, sys\nsys.path.insert(0, str(pathlib.Path(__file__).parent / 'lib'))\n"
    )
    (root / "evals").mkdir()
    (root / "evals" / "test_calc.py").write_text(AGENT_EVAL)


def _killed_in_a_tool(root: Path) -> str:
    """Run the eval in a real pytest process, SIGKILL it while case c3's tool call runs."""
    flag = root / "stalled"
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "evals/test_calc.py", "-p", "no:cacheprovider"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_clean_env(STALL="3", STALL_FLAG=str(flag)),
    )
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert process.poll() is None, "pytest ended before the tool call"
            assert time.monotonic() < deadline, "the tool call never started"
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    listed = fxtr_cmd(root, "jobs", "--json", env=_clean_env())
    (row,) = json.loads(listed.stdout)
    assert row["status"] == "interrupted"
    return str(row["job_id"])


def _tool_results(root: Path) -> list[str]:
    """The result text of every cached tool call in the store."""
    from fxtr.store import open_store

    store = open_store(root / ".fxtr")
    try:
        return [e.result for a, e in store.iter_entries() if "/tool[" in a]
    finally:
        store.close()


def test_fxtr_resume_of_a_pytest_agent_eval_imports_as_pytest_did(tmp_path):
    """Killed in a tool call; `fxtr resume` (another process, no PYTHONPATH) finishes the job
    with the eval's real tools and mocks; `pytest --fxtr-resume` then passes every case and
    no tool result cached anywhere says the tool could not be imported."""
    _write_project(tmp_path)
    job_id = _killed_in_a_tool(tmp_path)
    resumed = fxtr_cmd(tmp_path, "resume", job_id, env=_clean_env())
    assert "cannot be imported" not in resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "attempt 2 · succeeded" in resumed.stdout
    again = subprocess.run(
        [sys.executable, "-m", "pytest", "evals/test_calc.py", "-p", "no:cacheprovider",
         "--fxtr-resume", "--fxtr-report", "r.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=_clean_env(),
    )  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:]
    assert "10 passed" in again.stdout
    (job,) = json.loads((tmp_path / "r.json").read_text())["jobs"]
    assert job["job_id"] == job_id
    results = _tool_results(tmp_path)
    assert results and not [r for r in results if "LookupError" in r or "cannot be" in r]
