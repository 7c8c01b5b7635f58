"""Issue 28 item 9: messages that name the thing and the fix, instead of a traceback or a
count: a bare ``@step``/``@workflow``, a step whose first parameter is not the context,
NaN/infinite scores and a 10,000-deep input under pytest."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fxtr.experiment.errors import SignatureError
from fxtr.experiment.steps import StepContext, step
from fxtr.experiment.workflows import WorkflowContext, workflow
from tests.faults.conftest import PYTHON, env


def test_a_bare_step_or_workflow_is_named_after_its_function() -> None:
    """``@step`` / ``@workflow`` without ``name=`` (as the seed writes them): the name is the
    function's module and qualified name (DESIGN §1); an empty name is still refused."""

    @step
    async def grade(context: StepContext, x: int) -> int:
        return x

    @workflow()
    async def flow(context: WorkflowContext) -> None:
        return None

    here = (
        "tests.faults.test_messages_faults.test_a_bare_step_or_workflow_is_named_after_its_function"
    )
    assert grade.name == f"{here}.grade"
    assert flow.name == f"{here}.flow"
    with pytest.raises(TypeError, match="needs a non-empty name="):

        @step(name="")
        async def empty(context: StepContext, x: int) -> int:
            return x


def test_a_step_without_the_context_first_is_shown_the_signature_to_write() -> None:
    with pytest.raises(SignatureError) as caught:

        @step(name="msg.late")
        async def late(x: int, context: StepContext) -> int:
            return x

    text = str(caught.value)
    assert "must take 'context: StepContext' as its first parameter" in text
    assert "Write: async def late(context: StepContext, x: int)" in text
    with pytest.raises(
        SignatureError, match=r"Write: async def none\(context: StepContext, x: int\)"
    ):

        @step(name="msg.none")
        async def none(x: int) -> int:
            return x


FLOW = """
from typing import Annotated, Any
from fxtr.experiment.handles import ArrayHandle
from fxtr.experiment.steps import StepContext, step
from fxtr.experiment.workflows import WorkflowContext, workflow

@step(name="ev.grade")
async def grade(context: StepContext, question: Any) -> float:
    return float(question) if isinstance(question, str) else 1.0

@workflow(name="ev.evaluate")
async def evaluate(
    context: WorkflowContext, question: Annotated[ArrayHandle[Any], "[case: str]"]
) -> Annotated[ArrayHandle[float], "[case: str]"]:
    return context.run_step("grade", grade, {"question": question}, map_over=["case"])
"""

EVAL = """
import pytest
from evflow import evaluate

DEEP = 1
for _ in range(10000):
    DEEP = [DEEP]
CASES = {cases}

@pytest.mark.fxtr(evaluate, threshold=0.5)
@pytest.mark.parametrize("question", list(CASES.values()), ids=list(CASES))
def test_eval(question, result):
    pass
"""


def _pytest(path: Path, cases: str) -> str:
    (path / "evflow.py").write_text(FLOW)
    (path / "test_e.py").write_text(EVAL.format(cases=cases))
    (path / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    child = env()
    child["PYTHONPATH"] += ":" + str(path)
    proc = subprocess.run(
        [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-q"],
        capture_output=True,
        text=True,
        cwd=path,
        env=child,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in out, out[-3000:]
    return out


def test_non_finite_scores_are_named_with_their_case_and_value(tmp_path: Path) -> None:
    out = _pytest(tmp_path, '{"one": "1", "nan": "nan", "inf": "inf", "ninf": "-inf"}')
    assert "3 score(s) are not finite numbers (case=nan: nan; case=inf: inf; case=ninf: -inf)" in (
        " ".join(out.split())
    ), out[-3000:]
    assert "3 case(s) missing" in out


def test_a_too_deep_input_names_its_case_and_argument(tmp_path: Path) -> None:
    out = _pytest(tmp_path, '{"one": "1", "deep": DEEP}')
    assert "case 'deep', argument 'question'" in out, out[-3000:]
    assert "nests too deeply to encode" in out
