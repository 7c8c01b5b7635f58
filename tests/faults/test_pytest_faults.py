"""Issue 15 under pytest: hostile parametrize ids, two evals sharing a workflow, Ctrl-C then
``--fxtr-resume``, bad options, a garbled or damaged store."""

from __future__ import annotations

import json
import signal
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.faults.conftest import PYTHON, env, fxtr_cli, wait_for

FLOW = '''
import asyncio
from pathlib import Path
from typing import Annotated
from fxtr.experiment.handles import ArrayHandle
from fxtr.experiment.steps import StepContext, step
from fxtr.experiment.workflows import WorkflowContext, workflow

GATE = {gate!r}

@step(name="ev.grade")
async def grade(context: StepContext, question: str) -> float:
    if GATE and question.startswith("slow"):
        Path(GATE, "started").touch()
        while not Path(GATE, "go").exists():
            await asyncio.sleep(0.005)
    if question.startswith("fail"):
        raise RuntimeError(f"grading failed for {{question!r}}")
    return 1.0 if question else 0.0

@workflow(name="ev.evaluate")
async def evaluate(
    context: WorkflowContext, question: Annotated[ArrayHandle[str], "[case: str]"]
) -> Annotated[ArrayHandle[float], "[case: str]"]:
    return context.run_step("grade", grade, {{"question": question}}, map_over=["case"])
'''

EVAL = '''
import pytest
from evflow import evaluate

QUESTIONS = {questions!r}
IDS = {ids!r}

@pytest.mark.fxtr(evaluate{marker})
@pytest.mark.parametrize("question", QUESTIONS, ids=IDS)
def test_eval(question, result):
    assert result == 1.0
'''


def _project(path: Path, *, gate: str = "", evals: dict[str, tuple[list[str], list[str]]],
             marker: str = "") -> None:
    (path / "evflow.py").write_text(FLOW.format(gate=gate))
    (path / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    for name, (questions, ids) in evals.items():
        (path / f"{name}.py").write_text(EVAL.format(questions=questions, ids=ids, marker=marker))


def _pytest(path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        capture_output=True, text=True, cwd=path, env=env(PYTHONPATH=env()["PYTHONPATH"] + ":" + str(path)),
        timeout=timeout,
    )


HOSTILE_IDS = ["a/b", "with space", "br[ack]et", "k=v", "a,b", 'quo"te', "it's", "x]/y[z=1"]


def test_hostile_parametrize_ids_each_show_their_own_error(tmp_path: Path) -> None:
    """Item 5: every item fails with its own question's error; addresses keep every id."""
    questions = [f"fail-{i}" for i in range(len(HOSTILE_IDS))]
    _project(tmp_path, evals={"test_ids": (questions, HOSTILE_IDS)})
    proc = _pytest(tmp_path, "--junitxml=j.xml", "--fxtr-report=r.json")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "INTERNALERROR" not in out
    cases = ET.parse(tmp_path / "j.xml").getroot().iter("testcase")
    seen = {}
    for case in cases:
        failure = case.find("failure")
        assert failure is not None, case.attrib
        seen[case.attrib["name"]] = (failure.attrib.get("message", "") + (failure.text or ""))
    assert len(seen) == len(HOSTILE_IDS), sorted(seen)
    for i, ident in enumerate(HOSTILE_IDS):
        names = [n for n in seen if n == f"test_eval[{ident}]"]
        assert names, (ident, sorted(seen))
        text = seen[names[0]]
        assert f"fail-{i}'" in text, (ident, text[:500])
        others = [f"fail-{j}'" for j in range(len(HOSTILE_IDS)) if j != i]
        assert not any(o in text for o in others), (ident, text[:500])
    report = json.loads((tmp_path / "r.json").read_text())
    addresses = [inv["address"] for job in report["jobs"] for inv in job["invocations"]]
    assert len(set(addresses)) == len(HOSTILE_IDS), addresses
    for ident in HOSTILE_IDS:
        assert sum(ident in a or json.dumps(ident) in a for a in addresses) >= 1, (ident, addresses)


def test_two_evals_sharing_a_workflow_and_ids_never_conflict(tmp_path: Path) -> None:
    """Item 7: same workflow, same ids, other values, two modules: both cached on rerun."""
    _project(tmp_path, evals={"test_one": (["q one", "q two"], ["c1", "c2"]),
                               "test_two": (["other one", "other two"], ["c1", "c2"])})
    first = _pytest(tmp_path, "--fxtr-report=r1.json")
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    second = _pytest(tmp_path, "--fxtr-report=r2.json")
    assert second.returncode == 0, (second.stdout + second.stderr)[-3000:]
    jobs = json.loads((tmp_path / "r2.json").read_text())["jobs"]
    assert len(jobs) == 2
    for job in jobs:
        assert job["status"] == "succeeded", job
        assert all(inv["from_cache"] for inv in job["invocations"]), job["invocations"]
    roots = {inv["address"].split("/")[0] for job in jobs for inv in job["invocations"]}
    assert len(roots) == 2, roots


def test_ctrl_c_then_resume_continues_the_same_job(tmp_path: Path) -> None:
    """Item 8: SIGINT while a step runs; no traceback; --fxtr-resume is attempt 2 of that job."""
    gate = tmp_path / "gate"
    gate.mkdir()
    _project(tmp_path, gate=str(gate),
             evals={"test_slow": (["fast one", "slow one"], ["fast", "slow"])})
    proc = subprocess.Popen(
        [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
        env=env(PYTHONPATH=env()["PYTHONPATH"] + ":" + str(tmp_path)),
    )
    try:
        wait_for(lambda: (gate / "started").exists() or proc.poll() is not None,
                 "the slow step to start", timeout=90)
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 2, out[-3000:]
    assert "Traceback (most recent call last)" not in out, out[-4000:]
    assert "INTERNALERROR" not in out, out[-4000:]
    listing = fxtr_cli("--store", str(tmp_path / ".fxtr"), "jobs", "--json")
    assert listing.returncode == 0, listing.stderr
    (interrupted,) = json.loads(listing.stdout)
    (gate / "go").touch()
    resumed = _pytest(tmp_path, "--fxtr-resume", "--fxtr-report=r.json")
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    (job,) = json.loads((tmp_path / "r.json").read_text())["jobs"]
    assert job["job_id"] == interrupted.get("job_id", interrupted.get("id")), (job, interrupted)
    assert job["attempt"] == 2
    fast = [inv for inv in job["invocations"] if "fast" in inv["address"]]
    assert fast and all(inv["from_cache"] for inv in fast), fast


def _usage(tmp_path: Path, *args: str, marker: str = "") -> subprocess.CompletedProcess[str]:
    _project(tmp_path, evals={"test_u": (["q"], ["c"])}, marker=marker)
    return _pytest(tmp_path, *args)


@pytest.mark.parametrize("kind", ["file", "readonly", "uncreatable"])
def test_bad_cache_dir_is_a_usage_error(tmp_path: Path, kind: str) -> None:
    """A cache dir that is a file, read-only, or cannot be created: exit 4 before anything runs."""
    if kind == "file":
        target = tmp_path / "afile"
        target.write_text("x")
    elif kind == "readonly":
        import os

        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o500)
        target = folder / "store"
    else:
        target = Path("/proc/fxtr-faults-store")
    proc = _usage(tmp_path, f"--fxtr-cache-dir={target}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert str(target) in out and "INTERNALERROR" not in out, out[-3000:]
    assert "Traceback" not in out


def test_report_path_that_is_a_directory_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    proc = _usage(tmp_path, "--fxtr-report=adir")
    out = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "adir" in out and not (tmp_path / ".fxtr").exists(), out[-3000:]


@pytest.mark.parametrize("args,marker", [(("--fxtr-fail-under=nan",), ""),
                                         ((), ", threshold=float('inf')")])
def test_nan_and_inf_thresholds_are_usage_errors(tmp_path: Path, args: tuple[str, ...],
                                                 marker: str) -> None:
    proc = _usage(tmp_path, *args, marker=marker)
    out = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert not (tmp_path / ".fxtr").exists()


def test_garbled_cache_db_under_pytest_is_one_clear_error(tmp_path: Path) -> None:
    """Item 4: no INTERNALERROR; the message names the store."""
    _project(tmp_path, evals={"test_g": (["q"], ["c"])})
    first = _pytest(tmp_path)
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    db = tmp_path / ".fxtr" / "cache" / "cache.db"
    db.write_bytes(b"garbage, not SQLite " * 300)
    for extra in db.parent.glob("cache.db-*"):
        extra.unlink()
    proc = _pytest(tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "INTERNALERROR" not in out, out[-3000:]
    assert str(tmp_path / ".fxtr") in out, out[-3000:]


