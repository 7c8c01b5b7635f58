"""Results that agree (issue 27) in the viewer: the exported page of real eval jobs, opened
in Chromium, shows what the summary and the `fxtr` command say.

The jobs come from eval modules run with pytester; the page is written by `fxtr view
--export` in a subprocess and opened from file:// with the network blocked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.test_agree_cli import fxtr, killed_job
from tests.test_browser import browser, page  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parent.parent

TEXT_EVAL = """
from typing import Annotated
import pytest
from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow

@step(name="t.say")
async def say(context: StepContext, q: str) -> str:
    return "said " + q

@workflow(name="t.wf")
async def wf(context: WorkflowContext, q: Annotated[ArrayHandle[str], "[case: str]"]
             ) -> Annotated[ArrayHandle[str], "[case: str]"]:
    return context.run_step("say", say, {"q": q}, map_over=["case"])

@pytest.mark.fxtr(wf)
@pytest.mark.parametrize("q", ["one", "two"])
def test_text(q, result):
    assert result == "said " + q
"""


@pytest.fixture(autouse=True)
def _ini(pytester, monkeypatch):
    for name in ("GITHUB_STEP_SUMMARY", "FAIL", "SLOW", "SALT"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def exported(pytester, job: str) -> Path:
    out = pytester.path / f"{job}.html"
    written = fxtr(pytester.path, "view", "--export", job, "-o", str(out))
    assert written.returncode == 0, written.stderr
    return out


def capitals(pytester):
    """The README's kit eval, run twice: the second run is served from the cache."""
    (pytester.path / "evals" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "evals/data/capitals.jsonl", pytester.path / "evals/data/capitals.jsonl")
    pytester.makepyfile(test_capitals=(ROOT / "evals/test_capitals.py").read_text())
    first = pytester.runpytest(
        "test_capitals.py", "-p", "no:cacheprovider", "--fxtr-report", "1.json"
    )
    second = pytester.runpytest(
        "test_capitals.py",
        "-p",
        "no:cacheprovider",
        "--fxtr-report",
        "2.json",
        "--fxtr-markdown",
        "summary.md",
    )
    jobs = [json.loads((pytester.path / f"{n}.json").read_text())["jobs"][0] for n in (1, 2)]
    return first, second, jobs


def test_one_figure_everywhere_and_the_cached_cell_shows_its_conversation(page, pytester):  # noqa: F811
    """0.875 [0.529, 0.978] in the summary, `fxtr show`, `fxtr compare`, the Markdown and the
    viewer; a cached cell opens the conversation and the case's target, not a ModelResponse
    dump; no internal `asked` node; the job is named by its eval."""
    _, second, (a, b) = capitals(pytester)
    mean, ci = "0.875", "[0.529, 0.978]"
    line = next(x for x in second.stdout.lines if x.startswith("model=mock/claude-haiku-4-5"))
    assert mean in line and ci in line
    shown = fxtr(pytester.path, "show", b["job_id"]).stdout
    assert f"mock/claude-haiku-4-5: mean {mean} {ci}" in shown
    assert shown.splitlines()[0].startswith("test_capitals.py::test_capitals · fxtr.evaluate · job")
    compared = fxtr(pytester.path, "compare", a["job_id"], b["job_id"]).stdout
    row = next(x for x in compared.splitlines() if x.startswith("mock/claude-haiku-4-5"))
    assert row.split()[1:5] == [mean, mean, "0.000", "[0.000,"]
    assert f"| {mean} | {ci} |" in (pytester.path / "summary.md").read_text()
    page.goto(exported(pytester, b["job_id"]).as_uri())
    page.wait_for_selector("#matrix td.cell")
    assert page.inner_text("h1").startswith("test_capitals.py::test_capitals")
    groups = page.inner_text("table.groups")
    assert mean in groups and ci in groups and "0.75" not in groups.replace("0.750", "")
    assert page.locator(".badge.gate").inner_text() == "gate passed"
    ops = page.eval_on_selector_all("svg.graph [data-op]", "els => els.map(e => e.dataset.op)")
    assert ops and not any(op.endswith("/asked") for op in ops)
    page.click("#matrix tr[data-case='australia'] td.cell >> nth=1")
    page.wait_for_selector("#panel .cell-invocation")
    panel = page.inner_text("#panel")
    assert "cached" in panel and "What is the capital of Australia?" in panel
    assert "The capital is Sydney." in panel  # the reply, from the run that made the entry
    assert page.inner_text("#panel .case-target") == "Canberra"
    assert "ModelResponse" not in panel


def test_a_scoreless_eval_is_not_missing_and_has_no_gate(page, pytester):  # noqa: F811
    """Items that passed on text results: cells say `no score`, not missing; no gate badge."""
    pytester.makepyfile(test_text=TEXT_EVAL)
    result = pytester.runpytest("test_text.py", "-p", "no:cacheprovider", "--fxtr-report", "r.json")
    result.assert_outcomes(passed=2)
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    listed = fxtr(pytester.path, "jobs").stdout
    assert "gate passed" not in listed and max(len(x) for x in listed.splitlines()) <= 100
    page.goto(exported(pytester, job["job_id"]).as_uri())
    page.wait_for_selector("#matrix td.cell")
    cells = page.eval_on_selector_all("#matrix td.cell", "els => els.map(e => e.innerText)")
    assert cells == ["no score · passed", "no score · passed"]
    assert page.locator("#matrix td.cell.missing").count() == 0
    assert page.locator(".badge.gate").count() == 0


def test_a_killed_job_is_interrupted_in_the_viewer(page, pytester, monkeypatch):  # noqa: F811
    """SIGKILL mid-run: the exported page says interrupted, never running."""
    job_id = killed_job(pytester, monkeypatch)
    page.goto(exported(pytester, job_id).as_uri())
    page.wait_for_selector(".job-head .status-interrupted")
    assert "running" not in page.inner_text(".job-head")
