"""Agent evals (DESIGN §12): tools, the loop's steps and stops, environments as values,
simulated users, trajectory scorers, caching and review, on the real engine with mock models."""

from __future__ import annotations

import importlib
import sys
import textwrap
import time
from typing import Literal

import pytest

import fxtr
from fxtr.agents import (
    Agent,
    Trajectory,
    UserSim,
    scorer,
    state_matches,
    tool,
    tool_call,
    tool_called,
)
from fxtr.evals import Case, Score, evaluate, includes, register_mock, user_text
from fxtr.experiment.arrays import Array
from fxtr.models import ModelRequest, ToolMessage
from tests import agent_examples as ex


def _inputs(agent, models, cases, scorer_=None, samples=1):
    return {
        "model": Array.from_mapping({m.name: m for m in models}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": scorer_ or includes(),
        "samples": samples,
        "agent": agent,
    }


# --- @tool --------------------------------------------------------------------------------


@tool(name="lookup", description="Find a record.")
def _find(
    key: str,
    kind: Literal["user", "order"] = "user",
    limit: int | None = None,
    tags: list[str] | None = None,
    env: dict | None = None,
) -> str:
    """Ignored, the description is given."""
    return key


def test_tool_schema_comes_from_hints_defaults_and_google_docstring():
    """Types, Literal, optional, defaults and Args descriptions make the JSON schema."""
    spec = ex.add.spec
    assert spec.name == "add" and spec.description == "Add two numbers."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "a": {"type": "number", "description": "the first number."},
            "b": {"type": "number", "description": "the second number."},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    found = _find.spec
    assert found.name == "lookup" and found.description == "Find a record."
    props = found.parameters["properties"]
    assert props["kind"] == {"enum": ["user", "order"], "type": "string", "default": "user"}
    assert props["limit"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
    assert props["tags"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}
    assert "env" not in props and _find.uses_env  # hidden from the model
    assert found.parameters["required"] == ["key"]
    assert ex.add(2, 3) == 5  # a Tool still calls its function


def test_a_tool_without_type_hints_or_not_importable_is_a_clear_error():
    """A parameter without a hint, and a tool defined in a function, name the fix."""

    def untyped(x):  # pragma: no cover - never called
        return x

    with pytest.raises(TypeError, match=r"'x' has no type hint \(write e.g. 'x: str'\)"):
        tool(untyped)

    def local(x: int) -> int:  # pragma: no cover - never called
        return x

    with pytest.raises(ValueError, match="not importable.*top level of a module"):
        tool(local)
    with pytest.raises(ValueError, match="environment function.*not importable"):
        Agent(tools=(ex.add,), env=lambda case: {})
    with pytest.raises(LookupError, match="cannot be imported"):
        Agent(env="tests.agent_examples:no_such_env")


def test_editing_a_tool_changes_its_code_hash_not_its_spec(tmp_path, monkeypatch):
    """The tool's source is part of its value (so of its calls' fingerprint)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    src = 'from fxtr.agents import tool\n@tool\ndef f(x: int) -> int:\n    """F."""\n    return x\n'
    (tmp_path / "edited_tool_mod.py").write_text(src)
    first = importlib.import_module("edited_tool_mod").f
    (tmp_path / "edited_tool_mod.py").write_text(src.replace("return x", "return x + 1"))
    second = importlib.reload(sys.modules["edited_tool_mod"]).f
    assert first.spec == second.spec and first.code != second.code


# --- the loop -----------------------------------------------------------------------------

CALC = register_mock("agent-calc", ex.calc_script)
CALC_CASES = [Case(id="a", input="2+3", target="5"), Case(id="b", input="10+4", target="14")]


def test_calculator_trajectory_turns_tools_and_addresses(tmp_path):
    """Each (model, case, sample) is a child workflow with turn[i] and tool[i,j] steps."""
    result = fxtr.run(
        evaluate, _inputs(Agent(tools=(ex.add,)), [CALC], CALC_CASES, samples=2), store=tmp_path
    )
    assert result.status == "succeeded"
    scores = result.output.to_dict()["mock/agent-calc"]
    assert {k: [s.value for s in v.values()] for k, v in scores.items()} == {
        "a": [1.0, 1.0],
        "b": [1.0, 1.0],
    }
    assert scores["a"][0].answer == "The answer is 5.0"
    addresses = {i.address for i in result.invocations}
    base = 'fxtr.evaluate/agent[model="mock/agent-calc",case=a,sample=1]'
    assert {f"{base}/turn[0]", f"{base}/tool[0,0]", f"{base}/turn[1]"} <= addresses
    assert not any(a.startswith(base + "/turn[2]") for a in addresses)
    steps = {i.step for i in result.invocations}
    assert steps == {
        "fxtr.agents.turn",
        "fxtr.agents.tool",
        "fxtr.agents.trajectory",
        "fxtr.agents.score",
    }
    # the mock saw the tool's result as a tool message, with the id stable from the turn
    second = [r for r in CALC.api().requests if isinstance(r.context[-1], ToolMessage)][-1]
    assert second.context[-1].results[0].tool_call_id == "call_0_0"
    assert second.tools[0].name == "add"


def test_rerun_asks_nothing_and_a_new_scorer_asks_no_model(tmp_path):
    """A rerun is all cache; changing only the scorer re-scores without a model call."""
    mock = register_mock("agent-calc-cache", ex.calc_script)
    agent = Agent(tools=(ex.add,))
    fxtr.run(evaluate, _inputs(agent, [mock], CALC_CASES), store=tmp_path)
    asked = len(mock.api().requests)
    assert asked == 4
    again = fxtr.run(evaluate, _inputs(agent, [mock], CALC_CASES), store=tmp_path)
    assert again.status == "succeeded" and all(i.from_cache for i in again.invocations)
    assert len(mock.api().requests) == asked
    rescored = fxtr.run(
        evaluate,
        _inputs(agent, [mock], CALC_CASES, tool_called("add", a=2.0)),
        store=tmp_path,
        conflict="overwrite",
    )
    assert len(mock.api().requests) == asked
    values = {k: v[0].value for k, v in rescored.output.to_dict()["mock/agent-calc-cache"].items()}
    assert values == {"a": 1.0, "b": 0.0}
    ran = {i.step for i in rescored.invocations if not i.from_cache}
    assert ran == {"fxtr.agents.score"}


def test_a_changed_system_prompt_is_reviewed_then_asked_again_from_turn_0(tmp_path):
    """Review by default (job needs_review, not failed); overwrite asks again from turn 0."""
    mock = register_mock("agent-calc-review", ex.calc_script)
    fxtr.run(evaluate, _inputs(Agent(tools=(ex.add,)), [mock], CALC_CASES), store=tmp_path)
    asked = len(mock.api().requests)
    changed = Agent(tools=(ex.add,), system="You are a careful calculator.")
    reviewed = fxtr.run(evaluate, _inputs(changed, [mock], CALC_CASES), store=tmp_path)
    assert reviewed.status == "needs_review"
    waiting = [i.address for i in reviewed.invocations if i.status == "needs_review"]
    assert sorted(waiting) == [
        f'fxtr.evaluate/agent[model="mock/agent-calc-review",case={c},sample=0]/turn[0]'
        for c in "ab"
    ]
    assert len(mock.api().requests) == asked
    redone = fxtr.run(
        evaluate, _inputs(changed, [mock], CALC_CASES), store=tmp_path, conflict="overwrite"
    )
    assert redone.status == "succeeded"
    new = mock.api().requests[asked:]
    assert len(new) == 4 and all(r.context[0].content[0].text.startswith("You are") for r in new)


def test_editing_a_tool_sends_its_calls_to_review(tmp_path, monkeypatch):
    """The tool's code is part of its calls' inputs: an edit is a conflict, not a stale hit."""
    monkeypatch.syspath_prepend(str(tmp_path))
    src = textwrap.dedent(
        '''
        from fxtr.agents import tool

        @tool
        def add(a: float, b: float) -> float:
            """Add."""
            return a + b
        '''
    )
    (tmp_path / "agent_tool_edit.py").write_text(src)
    module = importlib.import_module("agent_tool_edit")
    mock = register_mock("agent-calc-tool-edit", ex.calc_script)
    store = tmp_path / "s"
    first = fxtr.run(evaluate, _inputs(Agent(tools=(module.add,)), [mock], CALC_CASES), store=store)
    assert first.status == "succeeded"
    (tmp_path / "agent_tool_edit.py").write_text(src.replace("a + b", "a + b + 0"))
    module = importlib.reload(module)
    second = fxtr.run(
        evaluate, _inputs(Agent(tools=(module.add,)), [mock], CALC_CASES), store=store
    )
    assert second.status == "needs_review"
    waiting = {
        i.address.rsplit("/", 1)[1] for i in second.invocations if i.status == "needs_review"
    }
    assert waiting == {"tool[0,0]"}


def _raise_or_add(request: ModelRequest) -> object:
    last = request.context[-1]
    if isinstance(last, ToolMessage):
        return "saw: " + last.results[-1].content
    return [tool_call("bump", n=-1), tool_call("nope", x=1)]


def test_tool_errors_and_unknown_tools_are_fed_back_not_failures(tmp_path):
    """A raising tool and an unknown tool name come back as errors; the job succeeds."""
    mock = register_mock("agent-errors", _raise_or_add)
    agent = Agent(tools=(ex.bump,), env=ex.counter_env)
    result = fxtr.run(
        evaluate,
        _inputs(agent, [mock], [Case(id="x", input="go")], scorer(_trajectory_facts)),
        store=tmp_path,
    )
    assert result.status == "succeeded"
    score = result.output.to_dict()["mock/agent-errors"]["x"][0]
    assert score.explanation == (
        "errors=2 calls=2 stop=answer results=['ValueError: n must be >= 0, got -1', "
        "\"ToolNotFoundError: there is no tool named 'nope'; the tools are: bump.\"]"
    )
    tool_inv = [i for i in result.invocations if i.step == "fxtr.agents.tool"]
    assert [i.status for i in tool_inv] == ["succeeded"]  # its result is the error


def _trajectory_facts(case: Case, trajectory: Trajectory) -> Score:
    return Score(
        value=1.0,
        explanation=f"errors={trajectory.tool_errors} calls={trajectory.tool_calls} "
        f"stop={trajectory.stop} results={[r.content for r in trajectory.results]}",
    )


def _stop_facts(case: Case, trajectory: Trajectory) -> Score:
    return Score(
        value=float(trajectory.answer is not None),
        answer=trajectory.answer,
        explanation=f"{trajectory.stop} turns={trajectory.turns}",
    )


def _forever(request: ModelRequest) -> object:
    return tool_call("add", a=1, b=1)


@pytest.mark.parametrize(
    ("limits", "stop", "turns"),
    [
        ({"max_turns": 3}, "limit:turns", 3),
        ({"token_limit": 100}, "limit:tokens", None),
        ({"cost_limit": 0.00002}, "limit:cost", None),
    ],
)
def test_limits_end_a_trajectory_gracefully_and_it_is_still_scored(tmp_path, limits, stop, turns):
    """A limit is a stop kind, not a failure: answer None, scored like any trajectory."""
    mock = register_mock(f"agent-forever-{stop}", _forever, price_as="gpt-4o")
    agent = Agent(tools=(ex.add,), **limits)
    result = fxtr.run(
        evaluate,
        _inputs(agent, [mock], [Case(id="x", input="go")], scorer(_stop_facts)),
        store=tmp_path,
    )
    assert result.status == "succeeded"
    got = result.output.to_dict()[mock.name]["x"][0]
    assert got.value == 0.0 and got.explanation.startswith(stop)
    taken = int(got.explanation.split("turns=")[1])
    if turns is not None:
        assert taken == turns
    else:  # stopped by its budget, well before the default 20 turns
        assert 1 <= taken < 20


@tool
def slow_add(a: float, b: float) -> float:
    """Add slowly."""
    time.sleep(0.2)
    return a + b


def _forever_slow(request: ModelRequest) -> object:
    return tool_call("slow_add", a=1, b=1)


def test_time_limit_counts_tool_time(tmp_path):
    """time_limit counts the recorded seconds of model and tool calls."""
    mock = register_mock("agent-forever-slow", _forever_slow)
    agent = Agent(tools=(slow_add,), time_limit=0.5)  # 0.2 s a call: about 3 turns
    result = fxtr.run(
        evaluate,
        _inputs(agent, [mock], [Case(id="x", input="go")], scorer(_stop_facts)),
        store=tmp_path,
    )
    got = result.output.to_dict()[mock.name]["x"][0]
    assert got.explanation.startswith("limit:time")
    assert 2 <= int(got.explanation.split("turns=")[1]) <= 4


def _submitter(request: ModelRequest) -> object:
    turn = sum(type(m).__name__ == "AssistantMessage" for m in request.context)
    if turn == 0:
        return "Let me think."  # no tool call: with submit=True the agent is told to go on
    assert "submit()" in user_text(request)
    return tool_call("submit", answer="42")


def test_submit_ends_the_loop_with_the_submitted_answer(tmp_path):
    """With submit=True a plain reply continues; the submit call is the answer."""
    mock = register_mock("agent-submit", _submitter)
    result = fxtr.run(
        evaluate,
        _inputs(
            Agent(submit=True), [mock], [Case(id="x", input="q", target="42")], scorer(_stop_facts)
        ),
        store=tmp_path,
    )
    got = result.output.to_dict()[mock.name]["x"][0]
    assert (got.answer, got.explanation) == ("42", "submit turns=2")
    assert mock.api().requests[0].tools[0].name == "submit"


def test_environment_flows_from_call_to_call_and_state_matches(tmp_path):
    """Each call gets the state the previous left; state_matches lists differing fields."""
    cases = [Case(id="c1", input="case 1", metadata={"start": 1})]
    result = fxtr.run(
        evaluate,
        _inputs(ex.STEP_AGENT, [ex.STEPPER], cases, state_matches(ex.counter_expected)),
        store=tmp_path,
    )
    assert result.status == "succeeded"
    score = result.output.to_dict()[ex.STEPPER.name]["c1"][0]
    assert score.value == 1.0 and score.answer == "total 11"
    # the expected state differs in one field: the explanation names it
    wrong = fxtr.run(
        evaluate,
        _inputs(ex.STEP_AGENT, [ex.STEPPER], cases, state_matches(_wrong_expected)),
        store=tmp_path,
        conflict="overwrite",
    )
    bad = wrong.output.to_dict()[ex.STEPPER.name]["c1"][0]
    assert bad.value == 0.0
    assert bad.explanation == "1 field(s) differ (final != expected): history[3]: 4 != 5"


def _wrong_expected(case: Case) -> ex.Counter:
    return ex.Counter(start=1, history=[1, 2, 3, 5])


def test_cached_state_is_never_rebuilt_by_rerunning_tools(tmp_path, monkeypatch):
    """A rerun with a new scorer runs no tool: the final state comes from the record."""
    log = tmp_path / "log"
    monkeypatch.setenv("FXTR_TEST_LOG", str(log))
    cases = [Case(id="c2", input="case 2", metadata={"start": 2})]
    fxtr.run(evaluate, _inputs(ex.STEP_AGENT, [ex.STEPPER], cases), store=tmp_path / "s")
    lines = log.read_text().splitlines()
    assert sum(" tool " in line for line in lines) == 4
    second = fxtr.run(
        evaluate,
        _inputs(ex.STEP_AGENT, [ex.STEPPER], cases, state_matches(ex.counter_expected)),
        store=tmp_path / "s",
        conflict="overwrite",
    )
    assert log.read_text().splitlines() == lines  # neither asked nor run again
    assert second.output.to_dict()[ex.STEPPER.name]["c2"][0].value == 1.0


def _helpdesk(request: ModelRequest) -> object:
    return "How else can I help? " + user_text(request)


def _customer(request: ModelRequest) -> object:
    said = sum(type(m).__name__ == "AssistantMessage" for m in request.context)
    assert "Instruction: you want a refund" in request.context[0].content[0].text
    return "###STOP###" if said >= 2 else f"customer line {said}"


def test_a_simulated_user_answers_until_it_says_stop(tmp_path):
    """UserSim replies to each plain answer (user[i] steps) until its stop word."""
    agent_model = register_mock("agent-helpdesk", _helpdesk)
    user = register_mock("agent-customer", _customer)
    agent = Agent(user=UserSim(user))
    cases = [Case(id="r", input="hello", metadata={"user": "you want a refund"})]
    result = fxtr.run(
        evaluate, _inputs(agent, [agent_model], cases, scorer(_trajectory_facts)), store=tmp_path
    )
    assert result.status == "succeeded"
    asked = ("fxtr.agents.turn", "fxtr.agents.user")
    steps = [i.address.rsplit("/", 1)[1] for i in result.invocations if i.step in asked]
    assert sorted(steps) == ["turn[0]", "turn[1]", "user[0]", "user[1]"]
    score = result.output.to_dict()[agent_model.name]["r"][0]
    assert "stop=user_stop" in score.explanation
    last = agent_model.api().requests[-1]
    assert user_text(last) == "customer line 1"
    from fxtr.report import load_job
    from fxtr.store import open_store

    view = load_job(open_store(tmp_path), result.job_id)
    roles = {
        inv["step"]: {c.get("role") for c in inv.get("model_calls") or []}
        for inv in view.invocations.values()
        if inv["step"] in asked
    }
    assert roles == {"fxtr.agents.turn": {"subject"}, "fxtr.agents.user": {"user_sim"}}


def test_non_serialisable_tool_results_and_environments_fail_with_the_fix(tmp_path):
    """A tool returning an object, or an env builder returning one, names the fix."""
    mock = register_mock("agent-bad-result", _bad_call)
    result = fxtr.run(
        evaluate,
        _inputs(Agent(tools=(bad_result,)), [mock], [Case(id="x", input="go")]),
        store=tmp_path / "a",
    )
    assert result.status == "failed"
    failed = [i for i in result.invocations if i.status == "failed"]
    assert "cannot be sent to the model: return a str" in failed[0].error
    result = fxtr.run(
        evaluate,
        _inputs(Agent(tools=(ex.add,), env=bad_env), [CALC], [Case(id="x", input="1+1")]),
        store=tmp_path / "b",
    )
    failed = [i for i in result.invocations if i.status == "failed"]
    assert failed[0].address.endswith("/env")
    assert "keep the environment an Entity" in failed[0].error


@tool
def bad_result() -> object:
    """Return something that is not JSON."""
    return object()


def bad_env(case: Case) -> object:
    """Not a storable environment."""
    return object()


def _bad_call(request: ModelRequest) -> object:
    return tool_call("bad_result")


FLAKY = {"on": True}


def _flaky_steps(request: ModelRequest) -> object:
    if FLAKY["on"] and sum(type(m).__name__ == "AssistantMessage" for m in request.context) == 2:
        raise RuntimeError("provider hiccup")
    return ex.step_script(request)


def test_a_failed_turn_fails_the_job_and_resume_goes_on_from_it(tmp_path):
    """The trajectory stops at the failed turn; resume replays up to it and continues."""
    import asyncio

    mock = register_mock("agent-flaky", _flaky_steps)
    cases = ex.STEP_CASES[:2]
    inputs = _inputs(ex.STEP_AGENT, [mock], cases, state_matches(ex.counter_expected))
    first = fxtr.run(evaluate, inputs, store=tmp_path)
    assert first.status == "failed"
    failed = sorted(i.address.rsplit("/", 1)[1] for i in first.invocations if i.status == "failed")
    assert failed == ["turn[2]", "turn[2]"]
    asked = len(mock.api().requests)
    FLAKY["on"] = False
    try:
        second = asyncio.run(fxtr.resume(first.job_id, store=tmp_path))
    finally:
        FLAKY["on"] = True
    assert second.status == "succeeded"
    assert len(mock.api().requests) - asked == 2 * 3  # turns 2, 3 and 4 of each case
    values = [s[0].value for s in second.output.to_dict()[mock.name].values()]
    assert values == [1.0, 1.0]


def _two_bumps(request: ModelRequest) -> object:
    if isinstance(request.context[-1], ToolMessage):
        return "; ".join(r.content for r in request.context[-1].results)
    return [tool_call("bump", n=1), tool_call("bump", n=2)]


def test_parallel_calls_on_an_environment_run_in_order_each_on_the_state_before(tmp_path):
    """Two calls in one turn: tool[0,0] then tool[0,1], the second seeing the first's change."""
    mock = register_mock("agent-two-bumps", _two_bumps)
    result = fxtr.run(
        evaluate,
        _inputs(ex.STEP_AGENT, [mock], [Case(id="p", input="go", metadata={"start": 10})],
                scorer(_stop_facts)),
        store=tmp_path,
    )  # fmt: skip
    score = result.output.to_dict()[mock.name]["p"][0]
    assert (score.answer, score.explanation) == ("11; 13", "answer turns=2")
    tools = sorted(i.address.rsplit("/", 1)[1] for i in result.invocations if "tool[" in i.address)
    assert tools == ["tool[0,0]", "tool[0,1]"]
    second = mock.api().requests[-1].context[-2]
    assert [c.id for c in second.tool_calls] == ["call_0_0", "call_0_1"]
