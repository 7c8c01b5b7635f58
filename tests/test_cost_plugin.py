"""Cost control through pytest (DESIGN §14): the dry run and the budget."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

EVAL = textwrap.dedent(
    """
    import os
    from pathlib import Path

    import pytest

    from fxtr.evals import (Case, evaluate, includes, mock_judge, model_graded_fact,
                            register_mock, user_text)

    N = int(os.environ.get("EVAL_CASES", "6"))
    FIRST = int(os.environ.get("EVAL_FIRST", "0"))
    CALLS = Path(os.environ.get("EVAL_CALLS", "calls.txt")).resolve()
    JUDGE = os.environ.get("EVAL_JUDGE", "1") == "1"

    def answer(request):
        with open(CALLS, "a") as f:
            f.write("subject\\n")
        question = user_text(request)
        n = int(question.split()[-1].rstrip("?"))
        return f"The answer is {n}." + " Indeed." * (n % 7)

    CASES = [Case(id=f"c{i}", input=f"What is number {i}?", target=str(i))
             for i in range(FIRST, FIRST + N)]
    MODEL = register_mock("cost-subject", answer, price_as="gpt-5-mini")
    SCORER = model_graded_fact(mock_judge("cost-judge", price_as="gpt-5-mini")) if JUDGE else includes()

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": SCORER})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", CASES)
    def test_numbers(model, case, result):
        assert result is not None
    """
)


@pytest.fixture
def project(pytester, monkeypatch):
    pytester.makepyfile(test_numbers=EVAL)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    monkeypatch.setenv("EVAL_CALLS", str(pytester.path / "calls.txt"))
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def _calls(pytester: pytest.Pytester) -> int:
    path = Path(pytester.path / "calls.txt")
    return len(path.read_text().splitlines()) if path.exists() else 0


def _report(pytester: pytest.Pytester, name: str) -> dict:
    return json.loads((pytester.path / name).read_text())


def _ran(report: dict) -> int:
    """Invocations the real run executed (not served from the cache)."""
    return sum(not i["from_cache"] for job in report["jobs"] for i in job["invocations"])


def _jobs(pytester: pytest.Pytester) -> list:
    from fxtr.store import open_store

    store = open_store(pytester.path / ".fxtr")
    return list(store.iter_jobs())


def test_dry_run_counts_what_a_cold_run_then_runs_and_writes_no_job(project):
    dry = _run(project, "--fxtr-dry-run", "--fxtr-report", "dry.json")
    assert dry.ret == 0
    dry.stdout.fnmatch_lines(
        [
            "*fxtr dry run*",
            "*test_numbers: 12 invocation(s) would run, 12 model call(s)*",
            "*mock/cost-judge*judge*6*6*$*",
            "*mock/cost-subject*subject*6*6*$*",
        ]
    )
    (plan,) = _report(project, "dry.json")["dry_run"]
    assert _calls(project) == 0, "a dry run called a model"
    assert _jobs(project) == [], "a dry run wrote a job"
    real = _run(project, "--fxtr-report", "real.json")
    real.assert_outcomes(passed=6)
    report = _report(project, "real.json")
    assert plan["invocations"] == _ran(report) == 12
    assert plan["calls"] == sum(
        row["calls"] for row in report["jobs"][0]["cost"]["by_model"].values()
    )
    assert plan["at_least"] is False and plan["usd"] is not None and plan["usd"] > 0


def test_dry_run_counts_what_a_half_cached_run_then_runs(project, monkeypatch):
    monkeypatch.setenv("EVAL_CASES", "4")
    _run(project).assert_outcomes(passed=4)
    monkeypatch.setenv("EVAL_CASES", "8")
    before = _calls(project)
    dry = _run(project, "--fxtr-dry-run", "--fxtr-report", "dry.json")
    assert dry.ret == 0 and _calls(project) == before
    (plan,) = _report(project, "dry.json")["dry_run"]
    assert plan["cached"] == 8  # 4 cases x (generate, score)
    real = _run(project, "--fxtr-report", "real.json")
    real.assert_outcomes(passed=8)
    assert plan["invocations"] == _ran(_report(project, "real.json")) == 8


def test_dry_run_forecast_comes_from_history_for_new_cases(project, monkeypatch):
    """After a run, the forecast of new cases of the same kind is the median per invocation."""
    monkeypatch.setenv("EVAL_CASES", "7")
    _run(project, "--fxtr-report", "first.json").assert_outcomes(passed=7)
    first = _report(project, "first.json")["jobs"][0]
    monkeypatch.setenv("EVAL_FIRST", "7")
    _run(project, "--fxtr-dry-run", "--fxtr-report", "dry.json")
    (plan,) = _report(project, "dry.json")["dry_run"]
    import statistics

    generate = [i for i in first["invocations"] if i["step"] == "fxtr.generate"]
    assert len(generate) == 7
    # the forecast is the history's median per invocation, times the invocations
    from fxtr.store import open_store

    store = open_store(project.path / ".fxtr")
    per = {"fxtr.generate": [], "fxtr.score": []}
    for _address, entry in store.iter_entries():
        usage = entry.usage or {}
        for row in (usage.get("by_model") or {}).values():
            per[entry.meta["step"]].append(row["usd"])
    expected = 7 * statistics.median(per["fxtr.generate"]) + 7 * statistics.median(
        per["fxtr.score"]
    )
    assert plan["usd"] == pytest.approx(expected)


def test_dry_run_of_an_unpriced_model_says_n_a(project, monkeypatch):
    source = (project.path / "test_numbers.py").read_text()
    (project.path / "test_numbers.py").write_text(
        source.replace(
            'register_mock("cost-subject", answer, price_as="gpt-5-mini")',
            'register_mock("nameless", answer)',
        )
    )
    monkeypatch.setenv("EVAL_JUDGE", "0")
    dry = _run(project, "--fxtr-dry-run", "--fxtr-report", "dry.json")
    dry.stdout.fnmatch_lines(["*mock/nameless*subject*6*6*n/a*"])
    (plan,) = _report(project, "dry.json")["dry_run"]
    assert plan["usd"] is None and plan["unpriced"] == 6


def _scores(report: dict) -> list:
    return [(s["group"], s["mean"], s["n"]) for job in report["jobs"] for s in job["scores"]]


def test_a_budget_stops_calls_and_resume_with_a_new_budget_finishes_the_same(project, monkeypatch):
    from fxtr.store import open_store

    monkeypatch.setenv("EVAL_CASES", "10")
    _run(project, "--fxtr-cache-dir", "reference", "--fxtr-report", "ref.json")
    reference = _report(project, "ref.json")
    total = reference["jobs"][0]["cost"]["usd"]
    per_call = [
        row["usd"] / row["calls"]
        for _a, entry in open_store(project.path / "reference").iter_entries()
        for row in (entry.usage or {}).get("by_model", {}).values()
    ]
    assert len(per_call) == 20 and total > 0
    (project.path / "calls.txt").unlink()
    budget = total / 2
    run = _run(project, "--fxtr-max-cost", f"{budget:.8f}", "--fxtr-report", "b.json")
    assert run.ret == 1
    job = _report(project, "b.json")["jobs"][0]
    spent = job["cost"]["usd"]
    lines = [line for line in run.stdout.lines if line.strip()]
    at = lines.index(f"budget reached: ${spent:.4f} of ${budget:g}")
    assert lines[at + 1].startswith("====")  # the last line of the fxtr summary section
    assert any("fxtr summary" in line for line in lines[:at])
    failed = [i for i in job["invocations"] if i["status"] == "failed"]
    assert failed and all(i["reason"] == "budget" for i in failed)
    done = [i["address"] for i in job["invocations"] if i["status"] == "succeeded"]
    assert 0 < len(done) < 20
    assert spent <= budget + 32 * max(per_call)  # at most the calls in flight
    dry = _run(project, "--fxtr-resume", "--fxtr-dry-run", "--fxtr-report", "dry.json")
    assert dry.ret == 0
    (plan,) = _report(project, "dry.json")["dry_run"]
    again = _run(project, "--fxtr-resume", "--fxtr-max-cost", "100", "--fxtr-report", "r.json")
    again.assert_outcomes(passed=10)
    resumed = _report(project, "r.json")["jobs"][0]["invocations"]
    assert plan["invocations"] == sum(not i["from_cache"] for i in resumed) == 20 - len(done)
    assert all(i["from_cache"] for i in resumed if i["address"] in done)
    assert _calls(project) == 10, "a call made before the budget was reached was made again"
    assert _scores(_report(project, "r.json")) == _scores(reference)


@pytest.mark.parametrize("bad", ["-1", "lots", "nan"])
def test_a_bad_budget_is_a_usage_error_before_anything_runs(project, bad):
    run = _run(project, f"--fxtr-max-cost={bad}")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert "--fxtr-max-cost" in "\n".join(run.stderr.lines)
    assert _calls(project) == 0


USER_EVAL = textwrap.dedent(
    """
    from typing import Annotated

    import pytest

    from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow

    @step(name="demo.answer")
    async def answer(context: StepContext, question: str) -> str:
        raise AssertionError("a dry run executed a step")

    @step(name="demo.grade")
    async def grade(context: StepContext, answer: str) -> float:
        raise AssertionError("a dry run executed a step")

    @workflow(name="demo.evaluate")
    async def evaluate(
        context: WorkflowContext, question: Annotated[ArrayHandle[str], "[case: str]"]
    ) -> Annotated[ArrayHandle[float], "[case: str]"]:
        answers = context.run_step("answer", answer, {"question": question}, map_over=["case"])
        return context.run_step("grade", grade, {"answer": answers}, map_over=["case"])

    @pytest.mark.fxtr(evaluate)
    @pytest.mark.parametrize("question", ["q1", "q2", "q3"])
    def test_user(question, result):
        assert result is not None
    """
)


def test_steps_of_your_own_are_never_executed_and_counted_as_at_least(pytester):
    pytester.makepyfile(test_user=USER_EVAL)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    dry = _run(pytester, "--fxtr-dry-run", "--fxtr-report", "dry.json")
    assert dry.ret == 0
    dry.stdout.fnmatch_lines(["*test_user: at least 6 invocation(s) would run*"])
    (plan,) = _report(pytester, "dry.json")["dry_run"]
    assert plan["at_least"] is True and plan["invocations"] == 6 and plan["usd"] is None
    with_xdist = _run(pytester, "--fxtr-dry-run", "-n", "2")  # planned here, no worker started
    assert with_xdist.ret == 0
    with_xdist.stdout.fnmatch_lines(["*test_user: at least 6 invocation(s) would run*"])
