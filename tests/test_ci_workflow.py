"""docs/ci.md's workflow, played: main's run, a pull request that degrades the prompt, its run.

The `run` scripts are read from the page's YAML and run by bash in a project of their own,
with `CI=true` and `$GITHUB_STEP_SUMMARY` as GitHub Actions sets them; main's report is
handed to the pull request as the artifact download would (DESIGN §8, §11, §13; issue 37).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

DOCS = Path(__file__).resolve().parents[1] / "docs"

EVAL = '''
import pytest

from fxtr.evals import Case, Model, evaluate, includes, register_mock, user_text
from fxtr.models import SystemMessage

PROMPT = "Think step by step, then give the capital."
CASES = [Case(id=f"q{i:02d}", input=f"q{i:02d}", target=f"C{i:02d}") for i in range(30)]


def reply(request):
    system = " ".join(
        block.text for m in request.context if isinstance(m, SystemMessage) for block in m.content
    )
    i = int(user_text(request)[1:])
    if "step by step" not in system and i % 3 == 0:
        return "I am not sure."  # the short prompt loses a third of the answers
    return f"The capital is C{i:02d}."


MODEL = Model(register_mock("ci-model", reply).name, system=PROMPT)


@pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"}, threshold=0.5,
                  inputs={"scorer": includes()})
@pytest.mark.parametrize("model", [MODEL])
@pytest.mark.parametrize("case", CASES)
def test_capitals(model, case, result):
    pass
'''
GOOD = "Think step by step, then give the capital."
WORSE = "Give the capital."
FLIPPED = [f"q{i:02d}" for i in range(0, 30, 3)]


def _steps() -> dict[str, str]:
    text = (DOCS / "ci.md").read_text()
    (workflow,) = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    steps = [s for job in yaml.safe_load(workflow)["jobs"].values() for s in job["steps"]]
    runs = {"evals": "", "viewer": ""}
    for s in steps:
        if "pytest evals/" in s.get("run", ""):
            runs["evals"] = s["run"]
        if "fxtr view --export" in s.get("run", ""):
            runs["viewer"] = s["run"]
    assert all(runs.values()), runs
    return runs


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "evals").mkdir()
        (root / "pytest.ini").write_text(
            "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        )
        self.prompt(GOOD)

    def prompt(self, text: str) -> None:
        source = textwrap.dedent(EVAL).replace(GOOD, text)
        (self.root / "evals" / "test_capitals.py").write_text(source)

    def run(self, script: str, summary: str, **env: str) -> subprocess.CompletedProcess[str]:
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("FXTR", "PYTEST"))}
        environ.update(
            CI="true",
            GITHUB_STEP_SUMMARY=str(self.root / summary),
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{environ.get('PATH', '')}",
        )
        environ.update(env)
        return subprocess.run(
            ["bash", "-e", "-c", script], cwd=self.root, env=environ, capture_output=True,
            text=True, timeout=300,
        )


def test_a_pull_request_that_degrades_the_prompt_is_caught_as_a_regression(tmp_path):
    runs = _steps()
    project = Project(tmp_path)
    main = project.run(runs["evals"], "main.md")
    assert main.returncode == 0, main.stdout + main.stderr
    assert "conflicts=overwrite (CI=true)" in main.stdout
    assert project.run(runs["viewer"], "main.md").returncode == 0
    # the artifact of main's run, downloaded into baseline/ (gh run download --dir baseline)
    (tmp_path / "baseline").mkdir()
    shutil.copy(tmp_path / "fxtr-report.json", tmp_path / "baseline" / "fxtr-report.json")

    project.prompt(WORSE)  # the pull request; the store (.fxtr) is main's, restored
    pr = project.run(runs["evals"], "pr.md")
    assert pr.returncode == 1, pr.stdout + pr.stderr
    assert "regressed" in pr.stdout
    assert re.search(r"regression in evals/test_capitals.py::test_capitals .*1\.000 -> 0\.667",
                     pr.stdout), pr.stdout
    assert "in review" not in pr.stdout and "case(s) missing" not in pr.stdout
    markdown = (tmp_path / "pr.md").read_text()
    assert "gate **failed** (regressed)" in markdown
    row = next(line for line in markdown.splitlines() if line.endswith("| regressed |"))
    assert "| 1.000 | 0.667 | -0.333 |" in row and "| 30 | -10/+0 |" in row
    assert f"- flipped to fail (model=mock/ci-model): {', '.join(FLIPPED)}" in markdown
    report = json.loads((tmp_path / "fxtr-report.json").read_text())
    (group,) = report["jobs"][0]["scores"]
    assert group["baseline"]["verdict"] == "regressed"
    assert group["baseline"]["flipped"] == {"to_fail": FLIPPED, "to_pass": []}

    # nothing was destroyed: back on main, with review on (a developer's machine), every
    # result of main's prompt is found again and nothing runs or waits in review
    project.prompt(GOOD)
    again = project.run("pytest evals/ --fxtr-report again.json", "again.md", CI="")
    assert again.returncode == 0, again.stdout + again.stderr
    invocations = json.loads((tmp_path / "again.json").read_text())["jobs"][0]["invocations"]
    assert invocations and all(i.get("from_cache") for i in invocations)


def test_cells_left_in_review_in_ci_are_named_in_the_step_summary_with_the_way_out(tmp_path):
    runs = _steps()
    project = Project(tmp_path)
    assert project.run(runs["evals"], "main.md").returncode == 0
    (tmp_path / "baseline").mkdir()
    shutil.copy(tmp_path / "fxtr-report.json", tmp_path / "baseline" / "fxtr-report.json")
    project.prompt(WORSE)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\nfxtr_cache_conflict = review\n"
    )
    pr = project.run(runs["evals"], "pr.md")
    assert pr.returncode == 1 and "conflicts=review," in pr.stdout
    markdown = (tmp_path / "pr.md").read_text()
    assert "**30 invocation(s) in review" in markdown
    assert "`fxtr cache why 'evals.test_capitals::test_capitals/generate[" in markdown
    assert "Rerun with --fxtr-cache-conflict=overwrite to run them" in markdown
    assert "not compared" in markdown
