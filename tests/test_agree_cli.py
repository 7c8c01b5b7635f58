"""Results that agree (issue 27), read back with the `fxtr` command in a subprocess.

The jobs are made by running real eval modules with pytester, as a user runs them; the
command is the installed `fxtr` script, run in the eval's directory.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.plugin.test_agree import EVAL, scores_of

FXTR = Path(sys.executable).with_name("fxtr")


def fxtr(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The `fxtr` command, as a user types it in ``cwd``."""
    command = [str(FXTR)] if FXTR.exists() else [sys.executable, "-m", "fxtr.cli"]
    return subprocess.run(
        [*command, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(autouse=True)
def _ini(pytester, monkeypatch):
    for name in ("GITHUB_STEP_SUMMARY", "FAIL", "SLOW", "SALT"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def run_eval(pytester, monkeypatch, table, *args, name="test_m"):
    """Run the eval module ``name`` over ``table``; its report's job."""
    monkeypatch.setenv("SCORES", json.dumps(table))
    pytester.makepyfile(**{name: EVAL.replace("def test_m(", f"def {name}(")})
    result = pytester.runpytest(
        f"{name}.py", "-p", "no:cacheprovider", "--fxtr-report", "r.json", *args
    )
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    return result, job


def test_compare_of_two_evals_is_a_usage_error_unless_any_eval(pytester, monkeypatch):
    """Two jobs of different evals: exit 2 naming both evals and --any-eval; with it, compared."""
    table = scores_of([1.0] * 10, [1.0] * 8 + [0.0] * 2)
    _, first = run_eval(pytester, monkeypatch, table, name="test_m")
    _, other = run_eval(pytester, monkeypatch, table, name="test_n")
    refused = fxtr(pytester.path, "compare", first["job_id"], other["job_id"])
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "test_m.py::test_m" in refused.stderr and "test_n.py::test_n" in refused.stderr
    assert "--any-eval" in refused.stderr
    assert "no significant change" not in refused.stdout
    refused_json = fxtr(pytester.path, "compare", first["job_id"], other["job_id"], "--json")
    assert refused_json.returncode == 2 and refused_json.stdout == ""
    forced = fxtr(pytester.path, "compare", first["job_id"], other["job_id"], "--any-eval")
    assert forced.returncode == 0, forced.stderr
    assert "no significant change" in forced.stdout and "--any-eval" in forced.stderr
    # two jobs of one eval need no flag
    _, again = run_eval(pytester, monkeypatch, table, name="test_m")
    same = fxtr(pytester.path, "compare", first["job_id"], again["job_id"])
    assert same.returncode == 0 and "no significant change" in same.stdout


def test_resume_recomputes_the_evaluation(pytester, monkeypatch):
    """After `fxtr resume` fixes the failed case, show and jobs give the new attempt's scores.

    The first attempt missed a case (gate failed, `missing 1`); the resumed one scored it:
    the record's groups, gate and the listing say so, and a baseline recorded with the first
    attempt is compared again.
    """
    table = scores_of([1.0] * 10, [1.0] * 10)
    _, base = run_eval(pytester, monkeypatch, table)
    monkeypatch.setenv("FAIL", "c03")
    monkeypatch.setenv("SALT", "v2")  # new settings: every case runs again
    first, job = run_eval(
        pytester,
        monkeypatch,
        table,
        "--fxtr-fail-under",
        "0.9",
        "--fxtr-baseline",
        "latest",
        "--fxtr-cache-conflict",
        "overwrite",
    )
    assert first.ret == 1
    shown = fxtr(pytester.path, "show", job["job_id"])
    assert "missing 1" in shown.stdout and "gate failed" in shown.stdout
    monkeypatch.delenv("FAIL")
    resumed = fxtr(pytester.path, "resume", job["job_id"], "--conflict", "overwrite")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "attempt 2 · succeeded" in resumed.stdout and "gate passed" in resumed.stdout
    shown = fxtr(pytester.path, "show", job["job_id"])
    assert shown.returncode == 0
    assert "gate passed" in shown.stdout and "gate failed" not in shown.stdout
    assert shown.stdout.count("n=10 · missing 0 · threshold") == 2
    assert "FAILED" not in shown.stdout and "missing 1" not in shown.stdout
    listed = json.loads(fxtr(pytester.path, "jobs", "--json").stdout)
    row = next(r for r in listed if r["job_id"] == job["job_id"])
    assert (row["status"], row["gate"], row["attempts"]) == ("succeeded", "gate passed", 2)
    from fxtr.store import open_store

    evaluation = open_store(pytester.path / ".fxtr").get_job(job["job_id"])["evaluation"]
    assert [g["n"] for g in evaluation["groups"]] == [10, 10]
    assert all(g["baseline"]["n_paired"] == 10 for g in evaluation["groups"])
    assert evaluation["baseline"]["job_id"] == base["job_id"]


def test_resume_that_still_fails_keeps_the_gate_failed(pytester, monkeypatch):
    """A resumed attempt that fails again: the gate stays failed and `fxtr resume` exits 1."""
    monkeypatch.setenv("FAIL", "c03")
    table = scores_of([1.0] * 10, [1.0] * 10)
    _, job = run_eval(pytester, monkeypatch, table, "--fxtr-fail-under", "0.9")
    resumed = fxtr(pytester.path, "resume", job["job_id"])
    assert resumed.returncode == 1
    assert "gate failed" in resumed.stdout and "missing 1" in resumed.stdout


def killed_job(pytester, monkeypatch) -> str:
    """A job whose pytest process was killed with SIGKILL mid-run; its id.

    Case c05's step hangs; once the job's record shows it running, the process is killed.
    """
    monkeypatch.setenv("SCORES", json.dumps(scores_of([1.0] * 10, [1.0] * 10)))
    monkeypatch.setenv("SLOW", "c05")
    pytester.makepyfile(test_m=EVAL)
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "test_m.py", "-p", "no:cacheprovider"],
        cwd=pytester.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            listed = fxtr(pytester.path, "jobs", "--json")
            rows = json.loads(listed.stdout) if listed.returncode == 0 else []
            if rows and rows[0]["status"] == "running":
                break
            time.sleep(0.5)
        else:
            pytest.fail("the job never showed as running")
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    monkeypatch.delenv("SLOW")
    return str(rows[0]["job_id"])


def test_a_killed_job_is_interrupted_and_resumes(pytester, monkeypatch):
    """SIGKILL mid-run: `fxtr jobs` and `show` say interrupted (never running for good);
    `--status interrupted` finds it; `fxtr resume` finishes it with its evaluation."""
    job_id = killed_job(pytester, monkeypatch)
    listed = fxtr(pytester.path, "jobs")
    line = next(line for line in listed.stdout.splitlines() if job_id[:12] in line)
    assert "interrupted" in line and "running" not in line
    assert json.loads(fxtr(pytester.path, "jobs", "--json").stdout)[0]["status"] == "interrupted"
    only = json.loads(fxtr(pytester.path, "jobs", "--status", "interrupted", "--json").stdout)
    assert [r["job_id"] for r in only] == [job_id]
    shown = fxtr(pytester.path, "show", job_id)
    assert shown.stdout.splitlines()[0].endswith("· interrupted")
    resumed = fxtr(pytester.path, "resume", job_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "attempt 2 · succeeded" in resumed.stdout
    assert "never scored" in resumed.stdout and "--fxtr-resume" in resumed.stdout
    row = json.loads(fxtr(pytester.path, "jobs", "--json").stdout)[0]
    assert (row["status"], row["attempts"]) == ("succeeded", 2)
