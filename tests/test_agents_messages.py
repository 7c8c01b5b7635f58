"""Messages and stops a new user meets on agent evals (issue 36 item 12): a hanging async tool
stopped by ``time_limit``, a first parameter named ``ctx``, a damaged kept entry under review,
a deeply nested tool call."""

from __future__ import annotations

import textwrap

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
