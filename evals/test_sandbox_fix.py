"""A coding agent in a sandbox, offline: fix a failing test in a small repository.

The repository (`data/calc_repo`) has a bug in `add` and a unittest that catches it. A
scripted agent views the code, runs the tests, fixes the line with `str_replace` and runs the
tests again, each call a new process in a bubblewrap sandbox over the trajectory's own copy of
the tree. `sandbox_check` runs the tests in the final tree: 1.0 when they pass. A rerun starts
no sandbox: every call and its layer are cached values.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fxtr.agents import Agent, tool_call
from fxtr.evals import Case, evaluate, register_mock
from fxtr.models import ModelRequest, ToolMessage
from fxtr.sandbox import Files, Sandbox, bash, sandbox_check, text_editor

TESTS = "python3 -m unittest -q"
STEPS = [
    tool_call("text_editor", command="view", path="/workspace/calc.py"),
    tool_call("bash", cmd=TESTS),
    tool_call(
        "text_editor",
        command="str_replace",
        path="calc.py",
        old_str="return a - b",
        new_str="return a + b",
    ),
    tool_call("bash", cmd=TESTS),
]


def coder(request: ModelRequest) -> object:
    """The scripted agent: the next step of the fix, then a summary."""
    done = sum(isinstance(m, ToolMessage) for m in request.context)
    return STEPS[done] if done < len(STEPS) else "Fixed add; the tests pass."


CODER = register_mock("sandbox-coder", coder)
AGENT = Agent(
    tools=(bash, text_editor),
    sandbox=Sandbox(files=Files.from_dir(Path(__file__).parent / "data" / "calc_repo")),
)
CASES = [Case(id="fix-add", input="The tests fail. Fix calc.py so that they pass.")]


@pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)"
)
@pytest.mark.fxtr(
    evaluate,
    dims={"model": "model", "case": "case"},
    inputs={"scorer": sandbox_check(TESTS), "agent": AGENT},
    threshold=1.0,
)
@pytest.mark.parametrize("model", [CODER])
@pytest.mark.parametrize("case", CASES)
def test_fix_the_failing_test(model, case, result):
    """The agent's final tree passes the repository's tests."""
    (score,) = result.to_dict().values()
    assert score.value == 1.0, score.explanation
