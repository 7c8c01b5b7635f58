"""Coding agents in a sandbox, from a user's side: scores, reruns, resumes, answer_to."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import fxtr
from fxtr.agents import Agent
from fxtr.evals import Case, evaluate, register_mock
from fxtr.experiment.arrays import Array
from fxtr.sandbox import (
    POOL,
    STARTED,
    Files,
    Sandbox,
    SandboxError,
    bash,
    sandbox_check,
    text_editor,
)
from fxtr.store import open_store
from tests import sandbox_examples as ex

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
ROOT = Path(__file__).parent.parent
FIXER = register_mock("sandbox-fixer", ex.fixer_script)
WRONG = register_mock("sandbox-wrong", ex.wrong_script)
AGENT = Agent(tools=(bash, text_editor), sandbox=ex.repo_sandbox())


def _inputs(agent, models, scorer, cases=ex.CASES):
    return {
        "model": Array.from_mapping({m.name: m for m in models}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": scorer,
        "samples": 1,
        "agent": agent,
    }


def _values(result):
    return {m: v["add"][0].value for m, v in result.output.to_dict().items()}


def test_a_fixing_agent_scores_1_and_a_wrong_one_0(tmp_path):
    """The fixer's tree passes the tests, the wrong edit's does not; the explanation says why."""
    result = fxtr.run(
        evaluate, _inputs(AGENT, [FIXER, WRONG], sandbox_check(ex.TESTS)), store=tmp_path
    )
    assert result.status == "succeeded"
    assert _values(result) == {FIXER.name: 1.0, WRONG.name: 0.0}
    wrong = result.output.to_dict()[WRONG.name]["add"][0]
    assert "exited 1" in wrong.explanation and "AssertionError" in wrong.explanation
    steps = {i.step for i in result.invocations}
    assert {"fxtr.sandbox.setup", "fxtr.sandbox.call", "fxtr.agents.turn"} <= steps


def test_a_rerun_starts_no_sandbox_and_a_new_check_runs_only_the_check(tmp_path):
    """All from cache, no sandbox started; a changed command re-scores without any call."""
    fxtr.run(evaluate, _inputs(AGENT, [FIXER], sandbox_check(ex.TESTS)), store=tmp_path)
    asked = len(FIXER.api().requests)
    started = STARTED[0]
    again = fxtr.run(evaluate, _inputs(AGENT, [FIXER], sandbox_check(ex.TESTS)), store=tmp_path)
    assert again.status == "succeeded" and all(i.from_cache for i in again.invocations)
    assert STARTED[0] == started and len(FIXER.api().requests) == asked
    POOL.clear()  # the check must write the final tree from the store's parts
    materialized = POOL.materialized
    rescored = fxtr.run(
        evaluate,
        _inputs(AGENT, [FIXER], sandbox_check("grep -q 'a - b' calc.py")),
        store=tmp_path,
        conflict="overwrite",
    )
    assert _values(rescored) == {FIXER.name: 0.0}
    assert {i.step for i in rescored.invocations if not i.from_cache} == {"fxtr.agents.score"}
    assert STARTED[0] == started + 1 and POOL.materialized == materialized + 1
    assert len(FIXER.api().requests) == asked


def test_a_tool_calls_fingerprint_holds_the_tree_it_ran_on(tmp_path):
    """Another starting tree re-runs every call (same conversation, different files)."""
    fxtr.run(evaluate, _inputs(AGENT, [FIXER], sandbox_check(ex.TESTS)), store=tmp_path)
    other = Agent(
        tools=(bash, text_editor),
        sandbox=Sandbox(files=Files({**ex.REPO, "README.md": "Another readme.\n"})),
    )
    result = fxtr.run(
        evaluate,
        _inputs(other, [FIXER], sandbox_check(ex.TESTS)),
        store=tmp_path,
        conflict="overwrite",
    )
    calls = [i for i in result.invocations if i.step == "fxtr.sandbox.call"]
    assert len(calls) == 4 and not any(i.from_cache for i in calls)
    turns = [i for i in result.invocations if i.step == "fxtr.agents.turn"]
    assert turns[0].from_cache  # the conversation before any call is the same


def test_a_sandbox_per_case_from_a_function(tmp_path):
    """Agent(sandbox=FUNCTION) builds each case's sandbox."""
    agent = Agent(tools=(bash, text_editor), sandbox=ex.repo_for)
    assert agent.sandbox == "tests.sandbox_examples:repo_for"
    result = fxtr.run(evaluate, _inputs(agent, [FIXER], sandbox_check(ex.TESTS)), store=tmp_path)
    assert _values(result) == {FIXER.name: 1.0}


def test_setup_is_a_cached_step_that_builds_the_starting_tree(tmp_path):
    """setup runs once over the files; its tree is what the calls start from."""
    box = ex.repo_sandbox(setup=("echo 'VERSION = 2' > version.py",))
    agent = Agent(tools=(bash, text_editor), sandbox=box)
    check = sandbox_check("python3 -c 'import version; assert version.VERSION == 2'")
    first = fxtr.run(evaluate, _inputs(agent, [FIXER], check), store=tmp_path)
    assert _values(first) == {FIXER.name: 1.0}
    again = fxtr.run(evaluate, _inputs(agent, [FIXER], check), store=tmp_path)
    assert all(i.from_cache for i in again.invocations)


def test_a_sandbox_tool_without_a_sandbox_is_refused():
    """Agent(tools=(bash,)) without sandbox= says how to give one."""
    with pytest.raises(ValueError, match="sandbox=fxtr.sandbox.Sandbox"):
        Agent(tools=(bash,))


def test_a_backend_that_cannot_start_fails_before_any_model_call(tmp_path, monkeypatch):
    """bubblewrap missing: the trajectory fails naming the fix, the model is never asked."""
    model = register_mock("sandbox-never-asked", ex.fixer_script)
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda n: None if n == "bwrap" else real(n))
    with pytest.raises(SandboxError, match="apt-get install bubblewrap"):
        fxtr.run(evaluate, _inputs(AGENT, [model], sandbox_check(ex.TESTS)), store=tmp_path)
    assert not model.api().requests


def _answer(request):
    return "Here it is:\n```python\ndef add(a, b):\n    return a + b\n```\n"


def _wrong_answer(request):
    return "def add(a, b):\n    return a - b\n"


def test_answer_to_scores_a_models_answer_without_an_agent(tmp_path):
    """HumanEval-style: the first fenced block is written to the path, then the tests run."""
    right = register_mock("sandbox-answer-right", _answer)
    wrong = register_mock("sandbox-answer-wrong", _wrong_answer)
    tests = {"test_solution.py": "from solution import add\nassert add(2, 3) == 5\n"}
    check = sandbox_check(
        "python3 test_solution.py", answer_to="solution.py", sandbox=Sandbox(files=Files(tests))
    )
    inputs = {
        "model": Array.from_mapping({m.name: m for m in (right, wrong)}, dims=["model"]),
        "case": Array.from_mapping({"add": Case(id="add", input="Write add.")}, dims=["case"]),
        "scorer": check,
    }
    result = fxtr.run(evaluate, inputs, store=tmp_path)
    scores = {m: next(iter(v["add"].values())).value for m, v in result.output.to_dict().items()}
    assert scores == {right.name: 1.0, wrong.name: 0.0}
    started = STARTED[0]
    fxtr.run(evaluate, inputs, store=tmp_path)
    assert STARTED[0] == started


# --- SIGKILL mid-trajectory, then resume -------------------------------------------------

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import fxtr
    from fxtr.agents import Agent
    from fxtr.evals import Case, evaluate, register_mock
    from fxtr.experiment.arrays import Array
    from fxtr.sandbox import bash, sandbox_check, text_editor, POOL
    from fxtr.store import open_store
    from tests import sandbox_examples as ex

    store, mode = sys.argv[1], sys.argv[2]
    slow = register_mock("sandbox-slow-fixer", ex.slow_fixer_script)
    cases = [Case(id=f"c{k}", input="Fix calc.py.") for k in range(3)]
    inputs = {
        "model": Array.from_mapping({slow.name: slow}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": sandbox_check(ex.TESTS),
        "samples": 1,
        "agent": Agent(tools=(bash, text_editor), sandbox=ex.repo_sandbox()),
    }
    if mode == "run":
        result = fxtr.run(evaluate, inputs, store=store)
    else:
        (job_id,) = [j["job_id"] for j in open_store(store).iter_jobs()]
        result = asyncio.run(fxtr.resume(job_id, store=store))
    from fxtr.experiment._encoding import decode_text
    trees = {}
    for i in result.invocations:
        if i.step == "fxtr.agents.trajectory" and i.result_text:
            ref = decode_text(i.result_text)
            text = open_store(store).get_entity(ref.id) if hasattr(ref, "id") else None
            trajectory = decode_text(text) if text else ref
            trees[i.address.split("case=")[1].split(",")[0]] = trajectory.sandbox.tree
    print(json.dumps({
        "status": result.status,
        "scores": {c: s[0].value for c, s in result.output.to_dict()[slow.name].items()},
        "trajectories": trees,
        "materialized": POOL.materialized,
    }))
    """
)


def _start(script: Path, store: Path, mode: str, log: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "FXTR_TEST_LOG": str(log), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, str(script), str(store), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def _finish(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _final_trees(found: dict) -> dict[str, str]:
    assert len(found["trajectories"]) == 3
    return found["trajectories"]


def _materialize(store: Path, tree: str, into: Path) -> dict[str, bytes]:
    """The tree's files, written from the store's parts alone."""
    s = open_store(store)
    manifest = json.loads(s.get_blobs([tree])[tree])
    parts = s.get_blobs([v.split(":")[1] for v in manifest.values() if v.split(":")[1]])
    files = {}
    for path, value in manifest.items():
        digest = value.split(":")[1]
        if digest:
            files[path] = parts[digest]
            (into / path).parent.mkdir(parents=True, exist_ok=True)
            (into / path).write_bytes(parts[digest])
    return files


def test_sigkill_mid_trajectory_then_resume_asks_no_finished_turn_same_tree(tmp_path):
    """Killed after some turns, the resumed job re-asks at most the turn in flight, and each
    final tree is byte for byte the uninterrupted run's."""
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    ref_log = tmp_path / "ref.log"
    reference = _finish(_start(script, tmp_path / "ref", "run", ref_log))
    assert reference["status"] == "succeeded"
    assert set(reference["scores"].values()) == {1.0}
    total = len(ref_log.read_text().splitlines())
    assert total == 3 * 5

    store, log = tmp_path / "killed", tmp_path / "killed.log"
    log.touch()
    killed = _start(script, store, "run", log)
    deadline = time.monotonic() + 120
    while len(log.read_text().splitlines()) < 7:
        assert killed.poll() is None and time.monotonic() < deadline
        time.sleep(0.005)
    os.kill(killed.pid, signal.SIGKILL)
    killed.communicate()
    asked_before = len(log.read_text().splitlines())
    resumer = _start(script, store, "resume", log)
    resumed = _finish(resumer)
    assert resumed["status"] == "succeeded"
    assert resumed["scores"] == reference["scores"]
    asked_after = [
        line for line in log.read_text().splitlines() if line.startswith(f"{resumer.pid} ")
    ]
    in_flight = asked_before - (total - len(asked_after))
    assert asked_before + len(asked_after) <= total + 3, "finished turns were asked again"
    assert in_flight >= 0
    assert _final_trees(resumed) == _final_trees(reference)
    # the resume wrote each unfinished trajectory's tree once, never by re-running calls
    assert resumed["materialized"] <= 3
    for name, tree in _final_trees(resumed).items():
        a = _materialize(store, tree, tmp_path / "a" / name)
        b = _materialize(tmp_path / "ref", tree, tmp_path / "b" / name)
        assert a == b and b"return a + b" in a["calc.py"]
    asyncio.run(asyncio.sleep(0))
