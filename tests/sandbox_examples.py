"""A small repository with a failing test, and scripted coding agents (importable by path).

``fixer_script`` views the code, fixes the bug with ``str_replace``, runs the tests and
answers; ``wrong_script`` makes a wrong edit. Each script appends a line to $FXTR_TEST_LOG
when asked (the fake's own count, across processes).
"""

from __future__ import annotations

import os

from fxtr.agents import tool_call
from fxtr.evals import Case
from fxtr.models import ModelRequest, ToolMessage
from fxtr.sandbox import Files, Sandbox

REPO = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
    "test_calc.py": (
        "import unittest\n\nfrom calc import add, mul\n\n\n"
        "class TestCalc(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
        "    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n"
    ),
    "README.md": "A calculator whose add is wrong.\n",
}
TESTS = "python3 -m unittest -q"
CASES = [Case(id="add", input="The test of add fails. Fix calc.py so the tests pass.")]


def repo_sandbox(**settings: object) -> Sandbox:
    """The repository as a sandbox."""
    return Sandbox(files=Files(REPO), **settings)  # type: ignore[arg-type]


def repo_for(case: Case) -> Sandbox:
    """A sandbox per case (``Agent(sandbox=FUNCTION)``)."""
    return repo_sandbox()


def log(line: str) -> None:
    """Append a line to $FXTR_TEST_LOG."""
    path = os.environ.get("FXTR_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {line}\n")


def _calls(request: ModelRequest) -> int:
    return sum(isinstance(m, ToolMessage) for m in request.context)


def _script(request: ModelRequest, old: str, new: str) -> object:
    done = _calls(request)
    log(f"turn {done}")
    if done == 0:
        return tool_call("text_editor", command="view", path="/workspace/calc.py")
    if done == 1:
        return tool_call("bash", cmd=TESTS)
    if done == 2:
        return tool_call(
            "text_editor", command="str_replace", path="calc.py", old_str=old, new_str=new
        )
    if done == 3:
        return tool_call("bash", cmd=TESTS)
    last = request.context[-1]
    assert isinstance(last, ToolMessage)
    return "Tests: " + ("pass" if not last.results[0].is_error else "fail")


def fixer_script(request: ModelRequest) -> object:
    """View, run the tests, fix ``add``, run them again, answer."""
    return _script(request, "return a - b", "return a + b")


def wrong_script(request: ModelRequest) -> object:
    """The same steps with a wrong fix."""
    return _script(request, "return a - b", "return a * b")


def slow_fixer_script(request: ModelRequest) -> object:
    """The fixer, a tenth of a second a turn (time to be killed mid-trajectory)."""
    import time

    time.sleep(0.1)
    return fixer_script(request)
