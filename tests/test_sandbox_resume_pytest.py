"""A sandbox eval under pytest, SIGKILLed mid-trajectory, then ``pytest --fxtr-resume``: the
same job goes on (attempt 2), no finished turn is asked again, and each final tree is byte for
byte the one an uninterrupted run leaves (DESIGN §17, issue 39)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fxtr.agents._report import TRAJECTORY_STEP, load_trajectory
from fxtr.report import load_job
from fxtr.sandbox import read_tree
from fxtr.store import open_store

ROOT = Path(__file__).parent.parent

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)"
)

EVAL = textwrap.dedent(
    """
    import pytest

    from fxtr.agents import Agent
    from fxtr.evals import Case, evaluate, register_mock
    from fxtr.sandbox import bash, sandbox_check, text_editor
    from tests import sandbox_examples as ex

    SLOW = register_mock("sandbox-slow-fixer", ex.slow_fixer_script)
    AGENT = Agent(tools=(bash, text_editor), sandbox=ex.repo_sandbox())
    CASES = [Case(id=f"c{k}", input="Fix calc.py.") for k in range(3)]


    @pytest.mark.fxtr(
        evaluate,
        dims={"model": "model", "case": "case"},
        inputs={"scorer": sandbox_check(ex.TESTS), "agent": AGENT},
        threshold=1.0,
    )
    @pytest.mark.parametrize("model", [SLOW])
    @pytest.mark.parametrize("case", CASES)
    def test_fix(model, case, result):
        (score,) = result.to_dict().values()
        assert score.value == 1.0, score.explanation
    """
)


def _project(where: Path) -> Path:
    where.mkdir()
    (where / "test_sandbox_resume_eval.py").write_text(EVAL)
    return where


def _pytest(where: Path, log: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "FXTR_TEST_LOG": str(log), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "test_sandbox_resume_eval.py", "-p", "no:cacheprovider",
         "-q", "--fxtr-cache-dir", str(where / "store"), *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=where, env=env,
    )  # fmt: skip


def _finished(proc: subprocess.Popen[str]) -> str:
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-4000:]
    return out


def _trees(where: Path) -> tuple[str, int, dict[str, dict[str, bytes]]]:
    """The job, its attempt, and each case's final tree as its files' bytes (from the store)."""
    store = open_store(where / "store")
    (job,) = [j["job_id"] for j in store.iter_jobs()]
    view = load_job(store, job)
    trees = {}
    for address, inv in view.invocations.items():
        if inv.get("step") == TRAJECTORY_STEP and inv.get("status") == "succeeded":
            trajectory = load_trajectory(store, inv.get("result_text"))
            assert trajectory is not None
            case = address.split("case=")[1].split(",")[0].split("]")[0]
            trees[case] = read_tree(store, trajectory["sandbox"]["tree"])
    return job, int(view.attempt.get("attempt", 0)), trees


def test_sigkill_then_pytest_fxtr_resume_asks_no_finished_turn_same_trees(tmp_path):
    reference_log = tmp_path / "reference.log"
    _finished(_pytest(_project(tmp_path / "reference"), reference_log))
    total = len(reference_log.read_text().splitlines())
    assert total == 3 * 5
    _, _, expected = _trees(tmp_path / "reference")
    assert sorted(expected) == ["c0", "c1", "c2"]
    assert all(b"return a + b" in files["calc.py"] for files in expected.values())

    where, log = _project(tmp_path / "killed"), tmp_path / "killed.log"
    log.touch()
    killed = _pytest(where, log)
    deadline = time.monotonic() + 120
    while len(log.read_text().splitlines()) < 7:
        assert killed.poll() is None, killed.communicate()[0][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.005)
    os.kill(killed.pid, signal.SIGKILL)
    killed.communicate()
    asked_before = len(log.read_text().splitlines())
    assert asked_before < total

    resumer = _pytest(where, log, "--fxtr-resume")
    out = _finished(resumer)
    assert "1 passed" in out or "3 passed" in out, out[-2000:]
    asked_after = [
        line for line in log.read_text().splitlines() if line.startswith(f"{resumer.pid} ")
    ]
    # each trajectory's turn in flight at the kill may be asked again; no finished one
    assert asked_before + len(asked_after) <= total + 3, "finished turns were asked again"
    assert len(asked_after) >= total - asked_before
    _, attempt, trees = _trees(where)  # one job in the store: the killed one, resumed
    assert attempt == 2, "--fxtr-resume went on with the killed job"
    assert trees == expected  # byte for byte, read from each store's parts
