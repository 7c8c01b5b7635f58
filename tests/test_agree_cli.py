"""Results that agree (issue 27), read back with the `fxtr` command in a subprocess.

The jobs are made by running real eval modules with pytester, as a user runs them; the
command is the installed `fxtr` script, run in the eval's directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin.test_agree import EVAL, scores_of

FXTR = Path(sys.executable).with_name("fxtr")


def fxtr(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The `fxtr` command, as a user types it in ``cwd``."""
    command = [str(FXTR)] if FXTR.exists() else [sys.executable, "-m", "fxtr.cli"]
    return subprocess.run(
        [*command, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(autouse=True)
def _ini(pytester, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def run_eval(pytester, monkeypatch, table, *args, name="test_m"):
    """Run the eval module ``name`` over ``table``; its report's job."""
    monkeypatch.setenv("SCORES", json.dumps(table))
    pytester.makepyfile(**{name: EVAL.replace("def test_m(", f"def {name}(")})
    result = pytester.runpytest(
        f"{name}.py", "-p", "no:cacheprovider", "--fxtr-report", "r.json", *args
    )
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    return result, job


def test_compare_of_two_evals_is_a_usage_error_unless_any_eval(pytester, monkeypatch):
    """Two jobs of different evals: exit 2 naming both evals and --any-eval; with it, compared."""
    table = scores_of([1.0] * 10, [1.0] * 8 + [0.0] * 2)
    _, first = run_eval(pytester, monkeypatch, table, name="test_m")
    _, other = run_eval(pytester, monkeypatch, table, name="test_n")
    refused = fxtr(pytester.path, "compare", first["job_id"], other["job_id"])
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "test_m.py::test_m" in refused.stderr and "test_n.py::test_n" in refused.stderr
    assert "--any-eval" in refused.stderr
    assert "no significant change" not in refused.stdout
    refused_json = fxtr(pytester.path, "compare", first["job_id"], other["job_id"], "--json")
    assert refused_json.returncode == 2 and refused_json.stdout == ""
    forced = fxtr(pytester.path, "compare", first["job_id"], other["job_id"], "--any-eval")
    assert forced.returncode == 0, forced.stderr
    assert "no significant change" in forced.stdout and "--any-eval" in forced.stderr
    # two jobs of one eval need no flag
    _, again = run_eval(pytester, monkeypatch, table, name="test_m")
    same = fxtr(pytester.path, "compare", first["job_id"], again["job_id"])
    assert same.returncode == 0 and "no significant change" in same.stdout
