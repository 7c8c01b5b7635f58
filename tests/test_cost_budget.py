"""A budget buys scored cases, not answers without scores (DESIGN §14, issue 37 item 5).

Under ``--fxtr-max-cost`` a new case's answer is asked only when what the run spent, what is
in flight and reserved, and the forecast of the answer and of the judge calls its case will
need fit the budget; a judge of an answered case draws on what was reserved for it. So
every case answered is scored, and the overshoot stays within the calls in flight. With
history in the store (its models' median answers), the budget buys about as many cases as
it can pay for.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

EVAL = textwrap.dedent(
    """
    import os

    import pytest

    from fxtr.evals import Case, evaluate, mock_judge, model_graded_fact, register_mock

    N = int(os.environ.get("EVAL_CASES", "60"))
    FIRST = int(os.environ.get("EVAL_FIRST", "0"))
    K = int(os.environ.get("EVAL_JUDGE_SAMPLES", "1"))

    def answer(request):
        text = request.context[-1].content[0].text
        return f"The answer is {text.split()[-1].rstrip('?')}." + " Indeed." * (len(text) % 9)

    CASES = [Case(id=f"c{i}", input=f"What is number {i}?", target=str(i)) for i in range(FIRST, FIRST + N)]
    MODEL = register_mock("budget-subject", answer, delay=0.01, price_as="gpt-5-mini")
    JUDGE = mock_judge("budget-judge", price_as="gpt-4.1")
    SCORER = model_graded_fact(JUDGE, judge_samples=K)

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": SCORER})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", CASES)
    def test_budgeted(model, case, result):
        assert result is not None
    """
)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def _report(pytester: pytest.Pytester, name: str) -> dict:
    return json.loads(Path(pytester.path / name).read_text())


def _case(address: str) -> str:
    return address.partition("case=")[2].partition(",")[0].partition("]")[0]


def _answered_and_scored(job: dict, grading: str) -> tuple[set[str], set[str]]:
    def done(step: str) -> set[str]:
        return {
            _case(i["address"])
            for i in job["invocations"]
            if i["step"] == step and i["status"] == "succeeded"
        }

    return done("fxtr.generate"), done(grading)


def test_with_history_a_budget_buys_about_the_cases_it_can_pay_for(pytester, monkeypatch):
    """60 cases run; 60 new ones under half of what those cost: about 30 answered, each
    scored (the answers' and the judges' lengths are forecast from the store's history)."""
    pytester.makepyfile(test_budgeted=EVAL)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    _run(pytester, "--fxtr-report", "first.json")
    budget = _report(pytester, "first.json")["jobs"][0]["cost"]["usd"] / 2
    monkeypatch.setenv("EVAL_FIRST", "60")
    run = _run(pytester, "--fxtr-max-cost", f"{budget:.8f}", "--fxtr-report", "b.json")
    assert run.ret == 1
    job = _report(pytester, "b.json")["jobs"][0]
    answered, scored = _answered_and_scored(job, "fxtr.score")
    assert scored == answered, f"{len(answered - scored)} case(s) answered and never scored"
    assert 0.8 * 30 <= len(answered) < 60, f"{len(answered)} of 60 cases answered"
    assert job["cost"]["usd"] <= budget * 1.1


@pytest.mark.parametrize("judge_samples", [1, 3])
def test_every_case_answered_under_a_budget_is_scored(pytester, monkeypatch, judge_samples):
    from fxtr.store import open_store

    monkeypatch.setenv("EVAL_JUDGE_SAMPLES", str(judge_samples))
    pytester.makepyfile(test_budgeted=EVAL)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    _run(pytester, "--fxtr-cache-dir", "reference", "--fxtr-report", "ref.json")
    total = _report(pytester, "ref.json")["jobs"][0]["cost"]["usd"]
    per_call = [
        row["usd"] / row["calls"]
        for _a, entry in open_store(pytester.path / "reference").iter_entries()
        for row in (entry.usage or {}).get("by_model", {}).values()
    ]
    budget = total / 2
    run = _run(pytester, "--fxtr-max-cost", f"{budget:.8f}", "--fxtr-report", "b.json")
    assert run.ret == 1
    job = _report(pytester, "b.json")["jobs"][0]
    answered = {
        _case(i["address"])
        for i in job["invocations"]
        if i["step"] == "fxtr.generate" and i["status"] == "succeeded"
    }
    grading = "fxtr.score" if judge_samples == 1 else "fxtr.judge_vote"
    scored = {
        _case(i["address"])
        for i in job["invocations"]
        if i["step"] == grading and i["status"] == "succeeded"
    }
    assert answered, "no case was answered"
    assert scored == answered, f"{len(answered - scored)} case(s) answered and never scored"

    spent = job["cost"]["usd"]
    assert spent <= budget + 32 * max(per_call)  # at most the calls in flight
    refused = [i for i in job["invocations"] if i["status"] == "failed"]
    assert refused and all(i["reason"] == "budget" for i in refused)
    assert all(i["step"] == "fxtr.generate" for i in refused), "a judge of a paid answer refused"
