"""The kit through pytest, as a new user runs it: the README's fifteen-line eval
(``evals/test_capitals.py``) in a fresh project, with a report, a judge edit under review,
and a dataset with a broken line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
EVAL = ROOT / "evals" / "test_capitals.py"
DATA = ROOT / "evals" / "data" / "capitals.jsonl"


@pytest.fixture
def project(pytester):
    (pytester.path / "evals" / "data").mkdir(parents=True)
    shutil.copy(EVAL, pytester.path / "evals" / "test_capitals.py")
    shutil.copy(DATA, pytester.path / "evals" / "data" / "capitals.jsonl")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def _run(pytester, *args):
    return pytester.runpytest("evals/", "-p", "no:cacheprovider", *args)


def _report(pytester, name="report.json"):
    return json.loads((pytester.path / name).read_text())


def test_the_readme_eval_runs_reports_and_gates(project):
    assert len([line for line in EVAL.read_text().splitlines() if line.strip()]) <= 20
    result = _run(project, "--fxtr-report", "report.json", "-v")
    result.assert_outcomes(passed=16)
    result.stdout.fnmatch_lines(
        ["*test_capitals?france-mock/gpt-5-mini? PASSED*", "*model=mock/claude-haiku-4-5*0.875*pass"]
    )
    (job,) = _report(project)["jobs"]
    assert job["workflow"] == "fxtr.evaluate" and job["status"] == "succeeded"
    means = {s["group"]["model"]: s["mean"] for s in job["scores"]}
    assert means == {"mock/gpt-5-mini": 1.0, "mock/claude-haiku-4-5": 7 / 8}  # Sydney is wrong
    invocations = job["invocations"]
    assert len(invocations) == 2 * 8 * 3 * 2  # models x cases x samples x (generate, score)
    assert {i["step"] for i in invocations} == {"fxtr.generate", "fxtr.score"}
    assert all(i["address"].startswith("evals.test_capitals::test_capitals/") for i in invocations)
    again = _run(project, "--fxtr-report", "again.json")
    again.assert_outcomes(passed=16)
    assert all(i["from_cache"] for i in _report(project, "again.json")["jobs"][0]["invocations"])


def test_a_judge_edit_is_reviewed_and_overwrite_reruns_only_the_judge(project):
    _run(project).assert_outcomes(passed=16)
    path = project.path / "evals" / "test_capitals.py"
    source = path.read_text()
    edited = source.replace(
        "model_graded_fact(mock_judge())",
        'model_graded_fact(mock_judge(), instructions="Be strict. End with GRADE: C or GRADE: I.")',
    )
    assert edited != source
    path.write_text(edited)
    reviewed = _run(project, "--fxtr-report", "reviewed.json")
    reviewed.assert_outcomes(failed=16)
    (job,) = _report(project, "reviewed.json")["jobs"]
    assert job["status"] == "needs_review"
    by_step = {}
    for i in job["invocations"]:
        by_step.setdefault(i["step"], set()).add(i["status"])
    assert by_step == {"fxtr.generate": {"succeeded"}, "fxtr.score": {"needs_review"}}
    redone = _run(project, "--fxtr-report", "redone.json", "--fxtr-cache-conflict=overwrite")
    redone.assert_outcomes(passed=16)
    (job,) = _report(project, "redone.json")["jobs"]
    ran = {i["step"] for i in job["invocations"] if not i["from_cache"]}
    assert ran == {"fxtr.score"}


def test_a_broken_dataset_line_is_an_error_naming_the_file_and_line(project):
    data = project.path / "evals" / "data" / "capitals.jsonl"
    lines = data.read_text().splitlines()
    lines[3] = lines[3][:-5]  # cut the closing of line 4
    data.write_text("\n".join(lines) + "\n")
    result = _run(project)
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*capitals.jsonl:4: not a JSON object*fix this line or delete it*"])
