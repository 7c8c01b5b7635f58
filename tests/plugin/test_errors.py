"""Errors a user meets: bad markers, bad paths and values, a damaged store, Ctrl-C; and evals
that share a workflow without sharing addresses."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from tests.plugin.test_plugin import EVAL, runs, write_eval


@pytest.fixture(autouse=True)
def _env(monkeypatch, pytester):
    monkeypatch.delenv("EVAL_FAIL", raising=False)
    monkeypatch.delenv("EVAL_RUNS", raising=False)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def _marked(pytester, marker, parametrize=None):
    source = EVAL.format(bonus=0.0, threshold="")
    start = source.index("@pytest.mark.fxtr(")
    end = source.index("@pytest.mark.parametrize")
    body = source[end:]
    if parametrize:
        body = parametrize + "\n" + body
    pytester.makepyfile(test_demo=source[:start] + "@" + marker + "\n" + body)


def test_dims_that_the_workflow_does_not_declare_are_a_collection_error(pytester):
    """dims={"question": ...} where the workflow declares [case: str]: the marker and the fix."""
    _marked(
        pytester,
        'pytest.mark.fxtr(evaluate, dims={"model": "model", "question": "question"}, '
        'inputs={"bonus": 0.0})',
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*@pytest.mark.fxtr on test_demo.py::test_demo: dims= puts 'question' in dimension "
            "'question', but workflow 'demo.evaluate' declares question: ArrayHandle[[]str[]] "
            "with dims [[]case: str[]]; write dims={'case': 'question', ...}*"
        ]
    )
    assert not (pytester.path / ".fxtr").exists()


def test_a_parametrized_name_that_is_no_workflow_input_is_an_error(pytester):
    """A parametrized argument the workflow does not take is refused, not silently ignored."""
    _marked(
        pytester,
        'pytest.mark.fxtr(evaluate, dims={"model": "model", "case": ("question", "lang")}, '
        'inputs={"bonus": 0.0})',
        parametrize='@pytest.mark.parametrize("lang", ["en"])',
    )
    pytester.makepyfile(
        test_demo=(pytester.path / "test_demo.py")
        .read_text()
        .replace(
            "def test_demo(model, question, result)", "def test_demo(model, question, lang, result)"
        )
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*parametrized argument 'lang' is not an input of workflow 'demo.evaluate'*"]
    )


def test_infinite_threshold_and_nan_fail_under_are_usage_errors(pytester):
    _marked(
        pytester,
        'pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "question"}, '
        'inputs={"bonus": 0.0}, threshold=float("inf"))',
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*threshold= must be a finite number, got inf*"])
    write_eval(pytester)
    result = pytester.runpytest("--fxtr-fail-under", "nan")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fxtr-fail-under must be a finite number, got 'nan'.*"])
    assert runs(pytester) == []


def test_cache_dir_that_is_a_file_and_report_that_is_a_directory(pytester):
    """Bad paths are usage errors at start-up: nothing runs."""
    write_eval(pytester)
    (pytester.path / "afile").write_text("x")
    (pytester.path / "adir").mkdir()
    result = pytester.runpytest("--fxtr-cache-dir", "afile", "--fxtr-report", "adir")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--fxtr-cache-dir */afile is a file, not a directory; give a directory path.*",
            "*--fxtr-report */adir is a directory; give a file path*",
        ]
    )
    assert runs(pytester) == []


def test_read_only_cache_dir_is_a_usage_error(pytester, tmp_path_factory):
    """A cache folder nobody may write is refused before anything runs (tried, not guessed)."""
    write_eval(pytester)
    command = [sys.executable, "-m", "pytest", "--fxtr-cache-dir", "locked/store"]
    where = pytester.path
    if os.geteuid() == 0:  # root writes anywhere: run the check as an unprivileged user
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv to drop privileges")
        where = Path(tempfile.mkdtemp(prefix="fxtr-ro-", dir="/tmp"))
        for name in ("test_demo.py", "tox.ini"):
            shutil.copy(pytester.path / name, where / name)
        where.chmod(0o777)
        command = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    locked = where / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    env = {
        **os.environ,
        "HOME": str(where),
        "PYTHONDONTWRITEBYTECODE": "1",
        "EVAL_RUNS": str(where / "runs.txt"),
    }
    try:
        proc = subprocess.run(
            [*command, "-p", "no:cacheprovider"],
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout + proc.stderr
        assert (
            "locked is not writable (Permission denied (EACCES)); give a directory you can write."
            in proc.stderr
        )
        assert not (locked / "store").exists() and not (where / "runs.txt").exists()
    finally:
        if where != pytester.path:
            shutil.rmtree(where, ignore_errors=True)


def test_a_garbled_store_is_one_clear_error(pytester):
    """A cache.db that is not a database: one usage error naming the store, no INTERNALERROR."""
    write_eval(pytester)
    (pytester.path / ".fxtr" / "cache").mkdir(parents=True)
    (pytester.path / ".fxtr" / "cache" / "cache.db").write_bytes(os.urandom(4096))
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    result.stderr.fnmatch_lines(
        ["*fxtr: */.fxtr/cache/cache.db is not a readable fxtr store*Move */.fxtr aside*"]
    )
    assert runs(pytester) == []


SLOW = textwrap.dedent(
    """
    import asyncio
    import os
    from typing import Annotated
    import pytest
    from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow

    RUNS = os.environ["EVAL_RUNS"]

    @step(name="slow.nap")
    async def nap(context: StepContext, i: int) -> int:
        await asyncio.sleep(0.4)
        with open(RUNS, "a") as f:
            f.write(context.address + "\\n")
        return i

    @workflow(name="slow.wf")
    async def wf(context: WorkflowContext,
                 i: Annotated[ArrayHandle[int], "[case: str]"]
                 ) -> Annotated[ArrayHandle[int], "[case: str]"]:
        return context.run_step("nap", nap, {"i": i}, map_over=["case"])

    @pytest.mark.fxtr(wf)
    @pytest.mark.parametrize("i", range(8))
    def test_slow(i, result):
        assert result == i
    """
)


def test_ctrl_c_then_resume_continues_the_job_as_its_next_attempt(pytester, monkeypatch):
    """SIGINT mid-job: no internal traceback; --fxtr-resume is attempt 2 of the same job."""
    pytester.makepyfile(test_slow=SLOW)
    monkeypatch.setenv("EVAL_RUNS", str(pytester.path / "runs.txt"))
    args = [sys.executable, "-m", "pytest", "--fxtr-concurrency", "1", "-p", "no:cacheprovider"]
    proc = subprocess.Popen(
        args, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while len(runs(pytester)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out + err
    assert "KeyboardInterrupt" in out
    assert "Traceback" not in out + err and "pytest_fxtr" not in out + err, out + err
    done = runs(pytester)
    assert 2 <= len(done) < 8
    result = pytester.runpytest("--fxtr-resume", "--fxtr-report", "r.json")
    result.assert_outcomes(passed=8)
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    assert job["attempt"] == 2
    ran = sorted(i["address"] for i in job["invocations"] if not i["from_cache"])
    assert set(ran).isdisjoint(done), "what the interrupted attempt finished is not rerun"
    assert len(ran) + len(done) == 8


SHARED = textwrap.dedent(
    """
    from typing import Annotated
    from fxtr import ArrayHandle, ScalarHandle, StepContext, WorkflowContext, step, workflow

    @step(name="shared.score")
    async def score(context: StepContext, question: str, bonus: float) -> float:
        return {"q1": 1.0, "q2": 0.5}[question] + bonus

    @workflow(name="shared.evaluate")
    async def evaluate(
        context: WorkflowContext,
        question: Annotated[ArrayHandle[str], "[case: str]"],
        bonus: ScalarHandle[float],
    ) -> Annotated[ArrayHandle[float], "[case: str]"]:
        return context.run_step("score", score, {"question": question, "bonus": bonus},
                                map_over=["case"])
    """
)

USER = textwrap.dedent(
    """
    import pytest
    from shared_wf import evaluate

    @pytest.mark.fxtr(evaluate, dims={{"case": "question"}}, inputs={{"bonus": {bonus}}})
    @pytest.mark.parametrize("question", ["q1", "q2"])
    def test_it(question, result):
        assert result == {{"q1": 1.0, "q2": 0.5}}[question] + {bonus}
    """
)


def test_two_evals_sharing_a_workflow_and_ids_never_conflict(pytester):
    """Same workflow, same ids, other values: each eval has its own addresses (its root)."""
    pytester.makepyfile(shared_wf=SHARED)
    pytester.syspathinsert()
    (pytester.path / "evals").mkdir()
    (pytester.path / "evals" / "test_one.py").write_text(USER.format(bonus=0.0))
    (pytester.path / "evals" / "test_two.py").write_text(USER.format(bonus=0.25))
    first = pytester.runpytest("evals", "--fxtr-report", "r1.json")
    first.assert_outcomes(passed=4)
    again = pytester.runpytest("evals", "--fxtr-report", "r2.json")
    again.assert_outcomes(passed=4)
    jobs = json.loads((pytester.path / "r2.json").read_text())["jobs"]
    addresses = sorted(i["address"] for job in jobs for i in job["invocations"])
    assert addresses == [
        "evals.test_one::test_it/score[case=q1]",
        "evals.test_one::test_it/score[case=q2]",
        "evals.test_two::test_it/score[case=q1]",
        "evals.test_two::test_it/score[case=q2]",
    ]
    assert all(i["from_cache"] for job in jobs for i in job["invocations"])
    assert all(job["status"] == "succeeded" for job in jobs)
