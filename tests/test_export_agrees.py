"""`fxtr export` of an eval's job is what `--fxtr-report` wrote for it, plus what the store
holds beyond the report: the job's inputs, each invocation's result and the code commit
(issue 36 item 6)."""

from __future__ import annotations

import json
import re
import subprocess

from tests.plugin.test_agree import EVAL, scores_of
from tests.test_agree_cli import fxtr


def test_export_has_the_reports_scores_and_the_inputs_results_and_commit(pytester, monkeypatch):
    for name in ("GITHUB_STEP_SUMMARY", "FAIL", "SLOW", "SALT"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    table = scores_of([1.0] * 8 + [0.0] * 2, [1.0] * 10)
    monkeypatch.setenv("SCORES", json.dumps(table))
    pytester.makepyfile(test_m=EVAL)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "eval"]):
        subprocess.run([*git, *args], cwd=pytester.path, check=True, capture_output=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=pytester.path, text=True,
                          capture_output=True, check=True).stdout.strip()  # fmt: skip
    ran = pytester.runpytest("test_m.py", "-p", "no:cacheprovider", "--fxtr-report", "r.json",
                             "--fxtr-fail-under", "0.5")  # fmt: skip
    ran.assert_outcomes(passed=20)
    (reported,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    exported_run = fxtr(pytester.path, "export", reported["job_id"], "-o", "e.json")
    assert exported_run.returncode == 0, exported_run.stderr
    (exported,) = json.loads((pytester.path / "e.json").read_text())["jobs"]
    # everything the report has, the export has, equal (the scores first of all)
    assert [g["mean"] for g in exported["scores"]] == [0.8, 1.0]
    for key, value in reported.items():
        if key == "invocations":
            continue
        assert exported[key] == value, key
    assert [{k: i[k] for k in r} for i, r in zip(exported["invocations"],
            reported["invocations"], strict=True)] == reported["invocations"]  # fmt: skip
    # and what the store holds beyond it
    assert exported["inputs"]["variant"]["$array"] == [["model", "str"]]
    results = {i["address"]: i["result"] for i in exported["invocations"]}
    assert results["test_m::test_m/score[model=a,case=c09]"] == 0.0
    assert results["test_m::test_m/score[model=b,case=c09]"] == 1.0
    assert re.fullmatch("[0-9a-f]{40}", head)
    assert exported["commit"]["commit"] == head
