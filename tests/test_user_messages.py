"""Messages and stops a new user meets (issue 36 item 12): a hanging async tool stopped by
``time_limit``, a first parameter named ``ctx``, a damaged kept entry under review, a deeply
nested tool call."""

from __future__ import annotations

import importlib
import re
import textwrap

import pytest

from fxtr.experiment.errors import SignatureError

HANGING = textwrap.dedent(
    '''
    import asyncio
    import pytest
    from fxtr.agents import Agent, Trajectory, scorer, tool, tool_call
    from fxtr.evals import Case, Score, evaluate, register_mock
    from fxtr.models import ToolMessage

    @tool
    async def wait_forever(seconds: float) -> str:
        """Wait for an event that never comes."""
        await asyncio.Event().wait()
        return "never"

    def caller(request):
        if isinstance(request.context[-1], ToolMessage):
            return "done waiting"
        return tool_call("wait_forever", seconds=1.0)

    def facts(case, trajectory):
        result = trajectory.messages[-1].results[0]
        return Score(value=0.0, answer=trajectory.answer,
                     explanation=f"{trajectory.stop}|{result.is_error}|{result.content}")

    MODEL = register_mock("hang-caller", caller)

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": scorer(facts), "samples": 1,
                              "agent": Agent(tools=(wait_forever,), time_limit=0.5)})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", [Case(id="x", input="wait")])
    def test_hang(model, case, result):
        got = next(result.values())
        print("RESULT", got.explanation)
        assert got.answer is None
    '''
)


def test_time_limit_cancels_an_async_tool_that_never_returns(pytester):
    """The tool is cancelled at the time left; its result says so; the stop is limit:time."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_hang=HANGING)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", timeout=120)
    result.assert_outcomes(passed=1)
    line = next(x for x in result.stdout.lines if x.startswith("RESULT"))
    stop, is_error, content = line.removeprefix("RESULT ").split("|")
    assert (stop, is_error) == ("limit:time", "True")
    assert content.startswith("TimeoutError: tool 'wait_forever' was cancelled after 0.5 s")
    assert "time_limit" in content
    # a rerun serves the cut call from the cache: same stop, no wait
    again = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", timeout=120)
    again.assert_outcomes(passed=1)
    assert line in again.stdout.lines


STEPS = textwrap.dedent(
    """
    from typing import Annotated
    from fxtr.experiment.arrays import Array
    from fxtr.experiment.steps import StepContext, step
    from fxtr.experiment.workflows import WorkflowContext, workflow
    from fxtr.experiment.handles import ScalarHandle

    @step(name="m.answer")
    async def answer(SIGNATURE) -> str:
        return "ok"
    """
)


@pytest.mark.parametrize(
    ("signature", "renamed"),
    [
        ("ctx: StepContext, question: str", "ctx"),
        ("ctx, question: str, n: int = 3", "ctx"),
        ('ctx: "StepContext", rows: Annotated[Array[str], "[case: str]"]', "ctx"),
        ("question: str, context: StepContext", None),
        ("question: str", None),
    ],
)
def test_the_signature_a_refused_step_is_told_to_write_is_accepted(
    tmp_path, monkeypatch, signature, renamed
):
    """Whatever the first parameter, the 'Write:' line, pasted back, defines the step."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"steps_{abs(hash(signature))}"
    (tmp_path / f"{name}.py").write_text(STEPS.replace("SIGNATURE", signature))
    with pytest.raises(SignatureError) as refused:
        importlib.import_module(name)
    text = str(refused.value)
    written = re.search(r"Write: async def answer\((.*)\)$", text)
    assert written, text
    assert ("rename 'ctx' to 'context'" in text) == (renamed is not None)
    fixed = f"{name}_fixed"
    (tmp_path / f"{fixed}.py").write_text(STEPS.replace("SIGNATURE", written.group(1)))
    module = importlib.import_module(fixed)  # accepted as written
    assert list(module.answer.signature.params)[-1] in ("question", "n", "rows")
