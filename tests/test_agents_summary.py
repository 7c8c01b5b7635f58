"""The terminal summary of an agent eval: per model the mean turns and tool calls, the tool
errors and the stops by kind, read back from the record."""

from __future__ import annotations

import textwrap

EVAL = textwrap.dedent(
    '''
    import pytest
    from fxtr.agents import Agent, tool, tool_call
    from fxtr.evals import Case, evaluate, includes, register_mock, user_text
    from fxtr.models import ToolMessage

    @tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    def calculator(request):
        if isinstance(request.context[-1], ToolMessage):
            return "It is " + request.context[-1].results[0].content
        a, b = user_text(request).split("+")
        return tool_call("add", a=float(a), b=float(b))

    def forgetful(request):  # forgets b every time: a tool error a turn, until the limit
        return tool_call("add", a=1.0)

    MODELS = [register_mock("sum-calc", calculator), register_mock("sum-loop", forgetful)]
    CASES = [Case(id="x", input="2+3", target="5"), Case(id="y", input="1+1", target="2")]

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes(), "samples": 2,
                              "agent": Agent(tools=(add,), max_turns=3)})
    @pytest.mark.parametrize("model", MODELS)
    @pytest.mark.parametrize("case", CASES)
    def test_sum(model, case, result):
        assert result is not None
    '''
)


def test_summary_shows_turns_tool_calls_errors_and_stops_per_model(pytester):
    """2 cases x 2 samples per model: the calculator answers, the loop hits max_turns."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_sum=EVAL)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    lines = result.stdout.str().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("agent model"))
    assert lines[header].split() == [
        "agent", "model", "trajectories", "turns", "tool", "calls", "tool", "errors", "stops",
    ]  # fmt: skip
    rows = [line.split() for line in lines[header + 2 : header + 4]]
    assert rows == [
        ["mock/sum-calc", "4", "2.0", "1.0", "0", "answer", "4"],
        ["mock/sum-loop", "4", "3.0", "3.0", "12", "limit:turns", "4"],
    ]
