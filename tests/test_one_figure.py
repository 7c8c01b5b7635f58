"""One figure, one value everywhere (issue 37 item 10): prices unknown, calls refused.

An unpriced model's cost is ``n/a`` on the first run and on every cached rerun (never
``$0.0000``); a call the budget refused was not made, so ``calls`` does not count it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EVAL = textwrap.dedent(
    """
    import os
    from pathlib import Path

    import pytest

    from fxtr.evals import Case, Model, evaluate, includes, register_mock, user_text
    from fxtr.models import Sampling

    CALLS = Path(os.environ["EVAL_CALLS"])
    PRICE = os.environ.get("EVAL_PRICE") or None

    def answer(request):
        with open(CALLS, "a") as f:
            f.write("call\\n")
        return "The answer is " + user_text(request).split()[-1] + " indeed" * 50

    CASES = [Case(id=f"c{i}", input=f"number {i}", target=str(i)) for i in range(10)]
    MODEL = Model(register_mock("figure-subject", answer, price_as=PRICE).name,
                  sampling=Sampling(max_tokens=60))

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes()})
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


def _made(pytester) -> int:
    path = Path(pytester.path / "calls.txt")
    return len(path.read_text().splitlines()) if path.exists() else 0


def _cost_table(lines: list[str]) -> dict[str, list[str]]:
    start = next(i for i, line in enumerate(lines) if line.startswith("model ") and "calls" in line)
    rows = {}
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        cells = line.split()
        rows[cells[0]] = cells
    return rows


def test_an_unpriced_model_costs_n_a_on_the_first_run_and_on_cached_reruns(project):
    for attempt in ("first", "cached"):
        result = project.runpytest_subprocess(
            "-p", "no:cacheprovider", "--fxtr-report", f"{attempt}.json",
            "--fxtr-markdown", f"{attempt}.md",
        )
        assert result.ret == 0
        cost = json.loads((project.path / f"{attempt}.json").read_text())["jobs"][0]["cost"]
        assert cost["usd"] is None, (attempt, cost)
        assert cost["by_model"]["figure-subject"]["usd"] is None, (attempt, cost)
        assert cost["by_role"]["subject"]["usd"] is None, (attempt, cost)
        rows = _cost_table(result.stdout.lines)
        assert rows["figure-subject"][-2:] == ["n/a", "n/a"], (attempt, rows)
        assert rows["total"][-2:] == ["n/a", "n/a"], (attempt, rows)
        markdown = (project.path / f"{attempt}.md").read_text()
        assert "$0.0000" not in markdown and "| n/a | n/a |" in markdown
        one_line = project.runpytest_subprocess("-p", "no:cacheprovider", "-q")
        assert "$0.0000" not in one_line.stdout.str()
        assert " · n/a · " in one_line.stdout.str()
        for command in (["show", "latest"], ["jobs"]):
            shown = subprocess.run([sys.executable, "-m", "fxtr.cli", *command],
                                   cwd=project.path, capture_output=True, text=True, timeout=60)
            assert shown.returncode == 0 and "n/a" in shown.stdout, shown.stdout
            assert "$0.0000" not in shown.stdout, shown.stdout
    assert _made(project) == 10  # the reruns were served by the cache


def test_fxtr_show_and_the_viewers_graph_give_an_operation_of_unpriced_calls_n_a(project):
    """The job's lines said n/a while its operations' lines said $0.0000."""
    from fxtr.report import load_job, operation_graph
    from fxtr.store import open_store

    assert project.runpytest_subprocess("-p", "no:cacheprovider", "--fxtr-report", "r.json").ret == 0
    job_id = json.loads((project.path / "r.json").read_text())["jobs"][0]["job_id"]
    shown = subprocess.run([sys.executable, "-m", "fxtr.cli", "show", job_id],
                           cwd=project.path, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    (generate,) = [line for line in shown.stdout.splitlines() if "generate" in line]
    assert "10 ran" in generate and generate.endswith("tokens · n/a"), shown.stdout
    assert "$0.0000" not in shown.stdout, shown.stdout
    graph = operation_graph(load_job(open_store(project.path / ".fxtr"), job_id))
    (node,) = [n for n in graph["nodes"] if n["name"] == "generate"]
    assert node["unpriced"] == 10 and node["cost_usd"] == 0.0


def test_calls_refused_by_the_budget_are_not_counted_as_calls(project, monkeypatch):
    monkeypatch.setenv("EVAL_PRICE", "gpt-5-mini")
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "--fxtr-concurrency", "1", "--fxtr-max-cost", "0.0004",
        "--fxtr-report", "r.json",
    )
    assert result.ret == 1
    job = json.loads((project.path / "r.json").read_text())["jobs"][0]
    refused = [i for i in job["invocations"] if i["reason"] == "budget"]
    made = _made(project)
    assert refused and 0 < made < 10
    assert job["cost"]["calls"] == made, (job["cost"], made)
    assert job["cost"]["by_model"]["figure-subject"]["calls"] == made
    rows = _cost_table(result.stdout.lines)
    assert rows["figure-subject"][1] == rows["total"][1] == str(made)
