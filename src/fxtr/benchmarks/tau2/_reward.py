"""τ²'s evaluator on fxtr trajectories: the reward τ² gives the same messages.

The trajectory becomes τ²'s messages (the agent's and the simulated user's, tool calls and
results, in order) and a ``SimulationRun``; τ²'s ``evaluate_simulation`` scores it. That
module is loaded as a private copy whose two outside seams are bound to fxtr: the domain
registry (``registry.get_env_constructor``, which in τ² imports its agents and their LLM
client) to the domain's ``get_environment``, and the LLM call of the natural-language
assertions (``llm_utils.generate``) to the judge given as ``reward(judge=...)``, called
through fxtr (cached with the score, recorded with the role ``judge``). Every rule, prompt
and combination of rewards is τ²'s code, run as it is.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib.util
import json
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

from fxtr.agents import Trajectory
from fxtr.benchmarks.tau2 import _tau2
from fxtr.evals import Case, Model, Score
from fxtr.models import (
    AssistantMessage,
    ContentText,
    ModelRequest,
    SystemMessage,
    ToolMessage,
    UserMessage,
)

Ask = Callable[[list[tuple[str, str]]], str]
"""A judge: (role, text) messages in, its reply's text out."""

_JUDGE: contextvars.ContextVar[Ask | None] = contextvars.ContextVar("tau2_judge", default=None)

STOPS = {"user_stop": "USER_STOP", "answer": "AGENT_STOP", "submit": "AGENT_STOP"}
"""fxtr's stops that τ² counts as a finished conversation; the others (limits) end it early,
as τ²'s ``max_steps`` does."""


def _generate(model: Any, messages: list[Any], tools: Any = None, **kwargs: Any) -> Any:
    """τ²'s ``llm_utils.generate`` for the evaluator's copy: the judge given to ``reward``."""
    ask = _JUDGE.get()
    if ask is None:
        msg = (
            "τ²'s evaluator asked a model (natural-language assertions) and reward() has no "
            "judge: give reward(judge=Model(...))."
        )
        raise ValueError(msg)
    text = ask([(m.role, m.content or "") for m in messages])
    return _tau2.tau2_module("data_model.message").AssistantMessage(role="assistant", content=text)


class _Registry:
    """τ²'s registry as the evaluator uses it: a domain's environment constructor."""

    def get_env_constructor(self, domain: str) -> Callable[..., Any]:
        return _tau2.domain(domain).get_environment  # type: ignore[no-any-return]


def _copy(name: str, seams: dict[str, types.ModuleType]) -> types.ModuleType:
    """A private copy of τ² module ``tau2.<name>``, importing ``seams`` for those modules.

    ``sys.modules`` is as it was after.
    """
    full = f"tau2.{name}"
    spec = importlib.util.find_spec(full)
    if spec is None or spec.loader is None:
        msg = f"τ²-bench's {full} is missing. Install it with: {_tau2.INSTALL}"
        raise ImportError(msg)
    module = importlib.util.module_from_spec(spec)
    before = {key: sys.modules.get(key) for key in seams}
    sys.modules.update(seams)
    try:
        spec.loader.exec_module(module)
    finally:
        for key, value in before.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value
    return module


_LOADING = threading.Lock()


def evaluator() -> types.ModuleType:
    """τ²'s ``tau2.evaluator.evaluator``, its seams bound to fxtr (see the module doc).

    Loaded once, under a lock: scores are graded in threads, and the copy is made with
    ``sys.modules`` briefly pointing at the seams.
    """
    with _LOADING:
        return _evaluator()


@functools.cache
def _evaluator() -> types.ModuleType:
    _tau2.tau2_module("data_model.simulation")  # the light modules, imported for real
    _tau2.tau2_module("evaluator.evaluator_env")
    llm = types.ModuleType("tau2.utils.llm_utils")
    llm.generate = _generate  # type: ignore[attr-defined]
    registry = types.ModuleType("tau2.registry")
    registry.registry = _Registry()  # type: ignore[attr-defined]
    nl = _copy("evaluator.evaluator_nl_assertions", {"tau2.utils.llm_utils": llm})
    return _copy(
        "evaluator.evaluator",
        {"tau2.registry": registry, "tau2.evaluator.evaluator_nl_assertions": nl},
    )


def _text(message: Any) -> str | None:
    return "".join(b.text for b in message.content) or None


NOT_FOUND = "ToolNotFoundError: "
"""How fxtr's loop answers a call of a tool the agent does not have."""


def messages(trajectory: Trajectory, domain: str | None = None) -> list[Any]:
    """The trajectory as τ²'s messages: what τ²'s orchestrator would have recorded.

    The system prompt is left out (τ² keeps it in the agent's state, not the trajectory);
    the simulated user's tool calls (``Trajectory.user_tools``) come where they were made. A
    call of a tool the domain does not have, which fxtr's loop answered itself, gets the
    answer τ²'s environment gives it (its evaluator replays every call and compares).
    """
    m = _tau2.tau2_module("data_model.message")
    asked: dict[str, Any] = {}

    def call(c: Any, requestor: str) -> Any:
        made = m.ToolCall(id=c.id, name=c.name, arguments=c.arguments, requestor=requestor)
        asked[c.id] = made
        return made

    def result(r: Any, requestor: str) -> Any:
        content = r.content
        if r.is_error and content.startswith(NOT_FOUND) and domain and r.tool_call_id in asked:
            content = _tau2.environment(domain).get_response(asked[r.tool_call_id]).content
        return m.ToolMessage(
            id=r.tool_call_id,
            role="tool",
            content=content,
            requestor=requestor,
            error=r.is_error,
        )

    own: dict[int, list[Any]] = {}
    for done in trajectory.user_tools:
        own.setdefault(done.at, []).append(done)
    out: list[Any] = []
    for n, message in enumerate([*trajectory.messages, None]):
        for done in own.get(n, ()):
            out.append(m.UserMessage(role="user", tool_calls=[call(c, "user") for c in done.calls]))
            out.extend(result(r, "user") for r in done.results)
        if isinstance(message, AssistantMessage):
            calls = [call(c, "assistant") for c in message.tool_calls]
            out.append(
                m.AssistantMessage(
                    role="assistant", content=_text(message), tool_calls=calls or None
                )
            )
        elif isinstance(message, UserMessage):
            out.append(m.UserMessage(role="user", content=_text(message)))
        elif isinstance(message, ToolMessage):
            out.extend(result(r, "assistant") for r in message.results)
    return out


def evaluate(case: Case, trajectory: Trajectory, judge: Ask | None = None) -> Any:
    """τ²'s ``RewardInfo`` for the trajectory of ``case`` (``judge``: NL assertions too).

    Raises:
        ValueError: the task's reward basis has natural-language assertions and there is no
            judge.
    """
    ev = evaluator()
    simulation = _tau2.tau2_module("data_model.simulation")
    task = _tau2.task(case.metadata["task"])
    reason = STOPS.get(trajectory.stop, "MAX_STEPS")
    run = simulation.SimulationRun(
        id=f"fxtr-{task.id}",
        task_id=task.id,
        start_time="",
        end_time="",
        duration=0.0,
        termination_reason=simulation.TerminationReason[reason],
        messages=messages(trajectory, case.metadata["domain"]),
    )
    kind = ev.EvaluationType.ALL_WITH_NL_ASSERTIONS if judge else ev.EvaluationType.ALL
    token = _JUDGE.set(judge)
    try:
        return ev.evaluate_simulation(
            simulation=run,
            task=task,
            evaluation_type=kind,
            solo_mode=False,
            domain=case.metadata["domain"],
        )
    except ValueError as exc:
        if "NL assertions are part of the reward basis" in str(exc):
            msg = (
                f"Task {task.id!r}'s reward basis has natural-language assertions ({exc}): "
                "give reward(judge=Model(...))."
            )
            raise ValueError(msg) from None
        raise
    finally:
        _JUDGE.reset(token)


def failed(info: Any, trajectory: Trajectory) -> list[str]:
    """Each criterion of τ²'s ``RewardInfo`` that failed, in words.

    Those outside the task's reward basis are marked so: they do not lower the reward.
    """
    basis = {b.value for b in info.reward_basis or ()}
    note = (info.info or {}).get("note") if isinstance(info.info, dict) else None
    out: list[str] = []
    if info.reward_basis is None and note and "prematurely" in note:
        out.append(f"stopped before the end ({trajectory.stop}): τ² gives 0 ({note})")

    def tag(kind: str) -> str:
        return "" if kind in basis else " (not in the reward basis)"

    if info.db_check is not None and not info.db_check.db_match:
        out.append(
            "DB: the final database differs from the one τ²'s gold actions leave" + tag("DB")
        )
    for a in info.env_assertions or ():
        if not a.met:
            e = a.env_assertion
            out.append(
                f"ENV_ASSERTION: {e.env_type} {e.func_name}({json.dumps(e.arguments)}) is not "
                f"{e.assert_value}" + tag("ENV_ASSERTION")
            )
    for a in info.action_checks or ():
        if not a.action_match:
            out.append(
                f"ACTION: {a.action.requestor} never called {a.action.name}"
                f"({json.dumps(a.action.arguments)})" + tag("ACTION")
            )
    for c in info.communicate_checks or ():
        if not c.met:
            out.append(f"COMMUNICATE: the agent never said {c.info!r}" + tag("COMMUNICATE"))
    for n in info.nl_assertions or ():
        if not n.met:
            out.append(
                f"NL_ASSERTION: {n.nl_assertion!r} not met ({n.justification})"
                + tag("NL_ASSERTION")
            )
    return out


def score(info: Any, trajectory: Trajectory) -> Score:
    """The ``Score`` of τ²'s ``RewardInfo``: its reward, and the failed criteria."""
    reasons = failed(info, trajectory)
    basis = ", ".join(b.value for b in info.reward_basis or ()) or "none"
    if reasons:
        explanation = f"reward {info.reward:g} (basis {basis}); failed: " + "; ".join(reasons)
    else:
        explanation = f"reward {info.reward:g} (basis {basis}): every criterion met"
    return Score(value=float(info.reward), answer=trajectory.answer, explanation=explanation)


async def grade(case: Case, trajectory: Trajectory) -> Score:
    """``reward()``: τ²'s evaluator without a judge (run in a thread: it rebuilds databases)."""
    info = await asyncio.to_thread(evaluate, case, trajectory)
    return score(info, trajectory)


async def grade_judged(case: Case, trajectory: Trajectory, judge: Model) -> Score:
    """``reward(judge=...)``: τ²'s evaluator, its NL assertions asked of ``judge``.

    The judge is called through fxtr: recorded with the role ``judge``, cached with the score.
    """
    from fxtr.evals._calls import call, judge_role

    loop = asyncio.get_running_loop()

    async def ask_async(said: list[tuple[str, str]]) -> str:
        blocks: list[Any] = [
            SystemMessage(content=(ContentText(text=text),))
            if role == "system"
            else UserMessage(content=(ContentText(text=text),))
            for role, text in said
        ]
        with judge_role():
            reply = await call(judge, ModelRequest(context=tuple(blocks), sampling=judge.sampling))
        return reply.text

    def ask(said: list[tuple[str, str]]) -> str:
        return asyncio.run_coroutine_threadsafe(ask_async(said), loop).result()

    info = await asyncio.to_thread(evaluate, case, trajectory, ask)
    return score(info, trajectory)
