"""The pytest plugin, driven by pytester: options, marker validation, jobs, gating, summary."""

from __future__ import annotations

import json
import textwrap

import pytest

EVAL = textwrap.dedent(
    """
    import os
    from pathlib import Path
    from typing import Annotated

    import pytest

    from fxtr import ArrayHandle, ScalarHandle, StepContext, WorkflowContext, step, workflow

    FAIL = set(filter(None, os.environ.get("EVAL_FAIL", "").split(",")))
    RUNS = Path(os.environ.get("EVAL_RUNS", "runs.txt")).resolve()

    @step(name="demo.score")
    async def score(context: StepContext, model: str, question: str, bonus: float) -> float:
        with open(RUNS, "a") as f:
            f.write(context.cache_key + "\\n")
        if question in FAIL:
            raise ConnectionError(f"provider down for {{question}}")
        return {{"q1": 1.0, "q2": 0.5, "q3": 0.0}}[question] + bonus

    @workflow(name="demo.evaluate")
    async def evaluate(
        context: WorkflowContext,
        model: Annotated[ArrayHandle[str], "[model: str]"],
        question: Annotated[ArrayHandle[str], "[case: str]"],
        bonus: ScalarHandle[float],
    ) -> Annotated[ArrayHandle[float], "[model: str, case: str]"]:
        return context.run_step("score", score, {{"model": model, "question": question,
                                                  "bonus": bonus}}, map_over=["model", "case"])

    @pytest.mark.fxtr(evaluate, dims={{"model": "model", "case": "question"}},
                      inputs={{"bonus": {bonus}}}{threshold})
    @pytest.mark.parametrize("model", ["small", "large"])
    @pytest.mark.parametrize("question", ["q1", "q2", "q3"])
    def test_demo(model, question, result):
        assert result >= 0.0
    """
)


def write_eval(pytester, bonus=0.0, threshold=None, name="test_demo.py"):
    extra = "" if threshold is None else f", threshold={threshold}"
    pytester.makepyfile(**{name[:-3]: EVAL.format(bonus=bonus, threshold=extra)})


def runs(pytester):
    path = pytester.path / "runs.txt"
    return path.read_text().splitlines() if path.exists() else []


INI = """
    [pytest]
    asyncio_default_fixture_loop_scope = function
"""


@pytest.fixture(autouse=True)
def _env(monkeypatch, pytester):
    monkeypatch.delenv("EVAL_FAIL", raising=False)
    monkeypatch.delenv("EVAL_RUNS", raising=False)
    pytester.makeini(INI)


def test_hermeticity_notices_are_in_the_summary(pytester):
    """A step writing a local file is noticed in the summary and the report."""
    write_eval(pytester)
    result = pytester.runpytest("--fxtr-report", "r.json")
    result.stdout.fnmatch_lines(
        [
            "hermeticity: 6 invocation(s) touched local state; e.g. (-v lists all)",
            "  test_demo::test_demo/score*",
            "    wrote file*",
        ]
    )
    invocations = json.loads((pytester.path / "r.json").read_text())["jobs"][0]["invocations"]
    assert all("runs.txt" in i["warnings"][0] for i in invocations)


def test_one_job_runs_every_case_and_items_get_their_slice(pytester):
    """Six items, one job: every (model, case) once, the summary, the header."""
    write_eval(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    assert len(runs(pytester)) == 6
    result.stdout.fnmatch_lines(
        [
            "fxtr: cache=*/.fxtr/cache, conflicts=review, verify=on, concurrency=32",
            "*= fxtr summary =*",
            "test_demo.py::test_demo · demo.evaluate · job * · attempt 1 · succeeded*",
            "step*invocations*ok*failed*skipped*review*ran*cached*time",
            "demo.score*6*6*0*0*0*6*0*",
            "group*mean*95% CI*interval*n*missing*threshold*gate",
            "model=small*0.500*[[]*[]]*t*3*0*",
        ]
    )
    assert (pytester.path / ".fxtr" / "cache").is_dir()


def test_rerun_is_served_from_the_cache(pytester):
    """A second run executes no step; the summary counts them cached."""
    write_eval(pytester)
    pytester.runpytest()
    result = pytester.runpytest()
    result.assert_outcomes(passed=6)
    assert len(runs(pytester)) == 6
    result.stdout.fnmatch_lines(["demo.score*6*6*0*0*0*0*6*"])


def test_k_narrows_the_job(pytester):
    """-k selects cases; the job covers only the selected keys."""
    write_eval(pytester)
    result = pytester.runpytest("-k", "q1 and small", "--fxtr-report", "out/report.json")
    result.assert_outcomes(passed=1)
    assert runs(pytester) == ["test_demo::test_demo/score[model=small,case=q1]"]
    report = json.loads((pytester.path / "out" / "report.json").read_text())
    (job,) = report["jobs"]
    assert [i["address"] for i in job["invocations"]] == [
        "test_demo::test_demo/score[model=small,case=q1]"
    ]


def test_failed_step_fails_its_item_with_reason_and_resume_reruns_only_it(pytester, monkeypatch):
    """A raising step fails its items (reason and error shown); --fxtr-resume reruns it only."""
    write_eval(pytester)
    monkeypatch.setenv("EVAL_FAIL", "q2")
    result = pytester.runpytest("--fxtr-report", "r1.json")
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*failed [[]tool_error[]]: step 'demo.score' at test_demo::test_demo/score[[]model=small,case=q2[]]: "
            "ConnectionError: provider down for q2*",
            "reason*count*example*error",
            "tool_error*2*test_demo::test_demo/score*ConnectionError*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    first = json.loads((pytester.path / "r1.json").read_text())["jobs"][0]
    assert first["status"] == "failed" and first["attempt"] == 1
    monkeypatch.delenv("EVAL_FAIL")
    (pytester.path / "runs.txt").unlink()
    result = pytester.runpytest("--fxtr-resume", "--fxtr-report", "r2.json")
    result.assert_outcomes(passed=6)
    assert sorted(runs(pytester)) == [
        "test_demo::test_demo/score[model=large,case=q2]",
        "test_demo::test_demo/score[model=small,case=q2]",
    ]
    second = json.loads((pytester.path / "r2.json").read_text())["jobs"][0]
    assert second["job_id"] == first["job_id"] and second["attempt"] == 2
    ran = [i["address"] for i in second["invocations"] if not i["from_cache"]]
    assert sorted(ran) == sorted(runs(pytester))


def test_gate_fails_the_run_even_when_every_item_passes(pytester):
    """All items pass, a group's mean is under the threshold: exit 1, the summary says why."""
    write_eval(pytester, threshold=0.6)
    result = pytester.runpytest()
    result.assert_outcomes(passed=6)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "model=small*0.500*[[]*[]]*t*3*0*0.600*FAIL",
            "fxtr: score gate failed for test_demo.py::test_demo (model=small): "
            "mean 0.500 < threshold 0.600*",
        ]
    )


def test_gate_passes_when_means_reach_the_threshold(pytester):
    """Means at or over the threshold: exit 0."""
    write_eval(pytester, bonus=0.5, threshold=0.9)
    result = pytester.runpytest()
    assert result.ret == 0
    result.stdout.fnmatch_lines(["model=small*1.000*0.900*pass"])


def test_missing_cases_fail_the_gate(pytester, monkeypatch):
    """A failed case counts as missing: the group fails whatever its mean."""
    write_eval(pytester, bonus=1.0, threshold=0.5)
    monkeypatch.setenv("EVAL_FAIL", "q3")
    result = pytester.runpytest("--fxtr-report", "r.json")
    assert result.ret == 1
    scores = json.loads((pytester.path / "r.json").read_text())["jobs"][0]["scores"]
    small = next(s for s in scores if s["group"] == {"model": "small"})
    assert small["missing"] == 1 and small["n"] == 2 and small["passed"] is False
    result.stdout.fnmatch_lines(["*score gate failed*(model=small): 1 case(s) missing*"])


def test_fail_under_sets_a_default_threshold(pytester):
    """--fxtr-fail-under gates evals without their own threshold."""
    write_eval(pytester, bonus=0.5)  # 1.5, 1.0, 0.5: off [0, 1], whose whole range fails
    assert pytester.runpytest("--fxtr-fail-under", "1.1").ret == 1
    assert pytester.runpytest("--fxtr-fail-under", "0.4").ret == 0


def test_changed_input_needs_review_and_overwrite_reruns(pytester):
    """A changed input at a cached address fails its items as needs_review; overwrite reruns."""
    write_eval(pytester)
    pytester.runpytest()
    write_eval(pytester, bonus=0.25)
    result = pytester.runpytest()
    result.assert_outcomes(failed=6)
    result.stdout.fnmatch_lines(
        [
            "*needs_review: step 'demo.score' at *: cache conflict: input(s) bonus changed*",
            "needs_review*6*",
            "*--fxtr-cache-conflict=overwrite*",
        ]
    )
    result = pytester.runpytest("--fxtr-cache-conflict", "overwrite")
    result.assert_outcomes(passed=6)


def test_ini_twins(pytester):
    """Each option has an fxtr_* ini twin; the CLI wins over ini."""
    write_eval(pytester)
    pytester.makeini(
        textwrap.dedent(INI)
        + textwrap.dedent("""
        fxtr_cache_dir = elsewhere
        fxtr_no_verify = true
        fxtr_concurrency = 3
        fxtr_cache_conflict = overwrite
        fxtr_report = ini-report.json
    """)
    )
    result = pytester.runpytest("--fxtr-concurrency", "5")
    result.stdout.fnmatch_lines(
        ["fxtr: cache=*elsewhere/cache, conflicts=overwrite, verify=off, concurrency=5"]
    )
    assert (pytester.path / "elsewhere").is_dir() and not (pytester.path / ".fxtr").exists()
    assert (pytester.path / "ini-report.json").exists()


def test_bad_option_values_are_usage_errors(pytester):
    """A bad conflict policy or concurrency is a usage error naming the choices."""
    write_eval(pytester)
    result = pytester.runpytest("--fxtr-cache-conflict", "keep", "--fxtr-concurrency", "zero")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*'keep' is not a valid fxtr cache conflict policy. Valid policies: review, overwrite.*",
            "*--fxtr-concurrency must be a positive whole number, got 'zero'.*",
        ]
    )


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ('pytest.mark.fxtr("nope")', "takes one positional argument, the @workflow to run"),
        (
            'pytest.mark.fxtr(evaluate, dims={"model": "modl"})',
            "dims['model'] names 'modl', which is not a parametrized argument",
        ),
        (
            'pytest.mark.fxtr(evaluate, dims={"model": "model"})',
            "parametrized argument 'question' is in no dimension",
        ),
        (
            'pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "question"})',
            "workflow 'demo.evaluate' needs input(s) ['bonus']",
        ),
        (
            'pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "question"}, inputs={"bonus": 0.0}, threshold="high")',
            "threshold= must be a number",
        ),
    ],
)
def test_marker_validation(pytester, marker, message):
    """Bad markers are usage errors that name the test and the fix."""
    source = EVAL.format(bonus=0.0, threshold="")
    start = source.index("@pytest.mark.fxtr(")
    end = source.index("@pytest.mark.parametrize")
    pytester.makepyfile(test_demo=source[:start] + "@" + marker + "\n" + source[end:])
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    escaped = message.replace("[", "[[]")
    result.stderr.fnmatch_lines([f"*@pytest.mark.fxtr on test_demo.py::test_demo*{escaped}*"])


def test_no_fxtr_items_no_header_no_summary_no_store(pytester):
    """Without an fxtr eval selected, the plugin stays silent and writes nothing."""
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    write_eval(pytester)
    result = pytester.runpytest("test_plain.py")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "fxtr:" not in out and "fxtr summary" not in out
    assert not (pytester.path / ".fxtr").exists()


def test_result_fixture_outside_an_eval_is_an_error(pytester):
    """Using `result` in an unmarked test says how to mark it."""
    pytester.makepyfile(test_plain="def test_one(result):\n    pass\n")
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*is not an fxtr eval: mark it @pytest.mark.fxtr(workflow, ...)*"])


def test_signature_errors_fail_the_items_without_a_plugin_traceback(pytester):
    """A workflow whose inputs do not fit fails every item with the SignatureError message."""
    source = EVAL.format(bonus='"not a float"', threshold="")
    pytester.makepyfile(test_demo=source)
    result = pytester.runpytest()
    result.assert_outcomes(failed=6)
    result.stdout.fnmatch_lines(
        ["*could not run: SignatureError: Launching workflow 'demo.evaluate'*bonus*"]
    )
    assert "pytest_fxtr" not in result.stdout.str()


def test_junit_xml_gets_score_properties(pytester):
    """Scores go to JUnit XML as properties."""
    # scores 1.5, 1.0, 0.5: unbounded, so the interval spans no range and the gate can pass
    # (1.0, 0.5, 0.0 in [0, 1] give [0, 1]: no gate passes on that, DESIGN §15)
    write_eval(pytester, bonus=0.5, threshold=0.1)
    pytester.runpytest("--junitxml", "junit.xml")
    xml = (pytester.path / "junit.xml").read_text()
    assert 'name="fxtr:test_demo.py::test_demo:model=small:mean" value="1"' in xml
    assert 'name="fxtr:test_demo.py::test_demo:model=large:passed" value="true"' in xml


def test_verbose_summary_lists_every_failure(pytester, monkeypatch):
    """-v lists each failed invocation under the reasons table."""
    write_eval(pytester)
    monkeypatch.setenv("EVAL_FAIL", "q1")
    result = pytester.runpytest("-v")
    result.stdout.fnmatch_lines(
        [
            "  failed test_demo::test_demo/score[[]model=small,case=q1[]]: ConnectionError*",
            "  failed test_demo::test_demo/score[[]model=large,case=q1[]]: ConnectionError*",
        ]
    )


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_works_with_pytest_asyncio_modes(pytester, mode):
    """Evals run beside async tests in both pytest-asyncio modes, with no loop conflicts."""
    write_eval(pytester)
    pytester.makepyfile(
        test_async="""
        import asyncio
        import pytest

        @pytest.mark.asyncio
        async def test_async():
            await asyncio.sleep(0)
    """
    )
    result = pytester.runpytest(
        "-o", f"asyncio_mode={mode}", "-o", "asyncio_default_fixture_loop_scope=function"
    )
    result.assert_outcomes(passed=7)


def test_async_eval_function_in_auto_mode(pytester):
    """An async eval test function works in auto mode."""
    source = EVAL.format(bonus=0.0, threshold="").replace("def test_demo(", "async def test_demo(")
    pytester.makepyfile(test_demo=source)
    result = pytester.runpytest(
        "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function"
    )
    result.assert_outcomes(passed=6)


def test_xdist_one_job_one_summary_same_outcomes(pytester, monkeypatch):
    """-n 2: the same outcomes, one summary, one job whose steps each ran once."""
    write_eval(pytester, threshold=0.6)
    monkeypatch.setenv("EVAL_RUNS", str(pytester.path / "runs.txt"))
    result = pytester.runpytest_subprocess("-n", "2", "--fxtr-report", "r.json")
    result.assert_outcomes(passed=6)
    assert result.ret == 1
    assert result.stdout.str().count("fxtr summary") == 1
    assert sorted(runs(pytester)) == sorted(set(runs(pytester))) and len(runs(pytester)) == 6
    report = json.loads((pytester.path / "r.json").read_text())
    assert len(report["jobs"]) == 1
    assert sum(not i["from_cache"] for i in report["jobs"][0]["invocations"]) == 6
    result.stdout.fnmatch_lines(["*score gate failed*(model=small)*"])


def test_last_failed_narrows_the_job(pytester, monkeypatch):
    """--lf selects the failed items; the job covers only their keys."""
    write_eval(pytester)
    monkeypatch.setenv("EVAL_FAIL", "q3")
    pytester.runpytest()
    monkeypatch.delenv("EVAL_FAIL")
    result = pytester.runpytest("--lf", "--fxtr-report", "r.json")
    result.assert_outcomes(passed=2)
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    assert sorted(i["address"] for i in job["invocations"]) == [
        "test_demo::test_demo/score[model=large,case=q3]",
        "test_demo::test_demo/score[model=small,case=q3]",
    ]


def test_long_jobs_show_progress(pytester):
    """A job running for more than two seconds writes progress lines."""
    pytester.makepyfile(
        test_slow="""
        import asyncio
        from typing import Annotated
        import pytest
        from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow

        @step(name="slow.nap")
        async def nap(context: StepContext, i: int) -> int:
            await asyncio.sleep(0.6)
            return i

        @workflow(name="slow.wf")
        async def wf(context: WorkflowContext,
                     i: Annotated[ArrayHandle[int], "[case: str]"]) -> Annotated[ArrayHandle[int], "[case: str]"]:
            return context.run_step("nap", nap, {"i": i}, map_over=["case"])

        @pytest.mark.fxtr(wf)
        @pytest.mark.parametrize("i", range(5))
        def test_slow(i, result):
            assert result == i
        """
    )
    result = pytester.runpytest("--fxtr-concurrency", "1")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        ["fxtr: slow.wf: * steps done (0 cached, 0 failed), $0.0000 so far, *s"]
    )


def test_dask_executor_option(pytester, monkeypatch):
    """--fxtr-executor=dask://local runs the steps on an in-process cluster, same outcomes."""
    import importlib.util

    # in a subprocess, and not importorskip: importing distributed in this process breaks
    # the package metadata lookups of later in-process pytester runs (their plugins go missing)
    if importlib.util.find_spec("distributed") is None:
        pytest.skip("distributed is not installed")
    write_eval(pytester, threshold=0.1)
    monkeypatch.setenv("EVAL_RUNS", str(pytester.path / "runs.txt"))
    result = pytester.runpytest_subprocess("--fxtr-executor", "dask://local")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["fxtr: *executor=dask://local*"])
    assert len(runs(pytester)) == 6


def test_bad_executor_is_a_usage_error(pytester):
    """An executor URL that is not dask:// is a usage error."""
    write_eval(pytester)
    result = pytester.runpytest("--fxtr-executor", "ray://x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*'ray://x' is not a valid fxtr executor. Use dask://HOST:PORT or dask://local.*"]
    )


def test_shared_postgres_store(pytester, postgres_server):
    """--fxtr-store=postgresql://... keeps the cache and the record in PostgreSQL."""
    from tests.pgserver import fresh_database

    url = fresh_database(postgres_server, "plugin_store")
    write_eval(pytester)
    result = pytester.runpytest("--fxtr-store", url)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines([f"fxtr: cache={url}, *"])
    assert not (pytester.path / ".fxtr").exists()
    result = pytester.runpytest("--fxtr-store", url)
    result.stdout.fnmatch_lines(["demo.score*6*6*0*0*0*0*6*"])
    assert len(runs(pytester)) == 6


def test_bad_store_url_is_a_usage_error(pytester):
    """A store URL that is not postgresql:// is a usage error."""
    write_eval(pytester)
    result = pytester.runpytest("--fxtr-store", "mysql://x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'mysql://x' is not a valid fxtr store URL*"])


def test_xdist_resume_continues_the_job(pytester, monkeypatch):
    """Under -n 2, --fxtr-resume continues the same job: attempt 2 reruns the failed cases."""
    write_eval(pytester)
    monkeypatch.setenv("EVAL_RUNS", str(pytester.path / "runs.txt"))
    monkeypatch.setenv("EVAL_FAIL", "q2")
    first = pytester.runpytest_subprocess("-n", "2", "--fxtr-report", "r1.json")
    first.assert_outcomes(passed=4, failed=2)
    # every invocation ran once across both workers, the failing ones included
    assert len(runs(pytester)) == 6 and len(set(runs(pytester))) == 6
    monkeypatch.delenv("EVAL_FAIL")
    (pytester.path / "runs.txt").unlink()
    second = pytester.runpytest_subprocess("-n", "2", "--fxtr-resume", "--fxtr-report", "r2.json")
    second.assert_outcomes(passed=6)
    one = json.loads((pytester.path / "r1.json").read_text())["jobs"][0]
    two = json.loads((pytester.path / "r2.json").read_text())["jobs"][0]
    assert two["job_id"] == one["job_id"] and two["attempt"] == 2
    assert sorted(set(runs(pytester))) == [
        "test_demo::test_demo/score[model=large,case=q2]",
        "test_demo::test_demo/score[model=small,case=q2]",
    ]
