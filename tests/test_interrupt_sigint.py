"""Ctrl-C (a real SIGINT to a real pytest process) mid-run (issue 36 item 4).

The job is `interrupted`, never `error`; it keeps the eval's name although pytest never
scored it; pytest's output, `fxtr jobs` and `fxtr show` agree, name what was running and
print the command that resumes it; `pytest --fxtr-resume` then finishes the same job.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.plugin.test_agree import EVAL, scores_of
from tests.test_agree_cli import fxtr


def _jobs(path) -> list[dict]:
    listed = fxtr(path, "jobs", "--json")
    return json.loads(listed.stdout) if listed.returncode == 0 else []


def test_ctrl_c_mid_run_leaves_the_job_interrupted_named_and_resumable(pytester):
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_m=EVAL)
    env = {k: v for k, v in os.environ.items() if k not in ("FAIL", "SALT", "GITHUB_STEP_SUMMARY")}
    env.update(SCORES=json.dumps(scores_of([1.0] * 10, [1.0] * 10)), SLOW="c05")
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "test_m.py", "-p", "no:cacheprovider"],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while True:  # every case but c05 (both models) done, c05's two steps hanging
            rows = _jobs(pytester.path)
            if rows and rows[0]["status"] == "running" and rows[0]["ran"] == 18:
                break
            assert process.poll() is None, process.communicate()[0]
            if time.monotonic() > deadline:
                pytest.fail(f"the job never reached its hanging steps: {rows}")
            time.sleep(0.3)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 2, output  # pytest's "interrupted"
    (row,) = _jobs(pytester.path)
    job_id = row["job_id"]
    assert (row["status"], row["eval"]) == ("interrupted", "test_m.py::test_m")
    # pytest's own output names the eval, the job, what ran, and how to resume it
    assert f"fxtr: test_m.py::test_m · m.evaluate · job {job_id}" in output
    assert "score[model=a,case=c05]" in output and "score[model=b,case=c05]" in output
    assert f"resume it: pytest --fxtr-resume test_m.py::test_m (or fxtr resume {job_id})" in output
    shown = fxtr(pytester.path, "show", job_id).stdout.splitlines()
    assert shown[0] == f"test_m.py::test_m · m.evaluate · job {job_id} · attempt 1 · interrupted"
    # the tree does not call a workflow whose results were not all in `succeeded`
    (workflow,) = [line for line in shown if "[workflow]" in line]
    assert workflow.endswith("[workflow] 1 interrupted"), shown
    assert any(
        line.startswith("interrupted: attempt 1") and "2 invocation(s)" in line for line in shown
    )
    assert f"resume it: pytest --fxtr-resume test_m.py::test_m (or fxtr resume {job_id})" in shown
    assert not [line for line in shown if "error" in line], shown
    # the printed command finishes the same job
    del env["SLOW"]
    resumed = subprocess.run(
        [sys.executable, "-m", "pytest", "--fxtr-resume", "test_m.py::test_m",
         "-p", "no:cacheprovider"],
        cwd=pytester.path, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert "20 passed" in resumed.stdout
    (row,) = _jobs(pytester.path)
    assert (row["job_id"], row["status"], row["attempts"]) == (job_id, "succeeded", 2)
    assert row["ran"] == 2  # only c05's two steps ran again
