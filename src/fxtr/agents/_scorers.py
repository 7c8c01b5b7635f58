"""Scorers of trajectories: ``state_matches``, ``tool_called``, ``scorer(FUNCTION)``."""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fxtr.agents._tool import import_path, path_of
from fxtr.evals._cases import Case
from fxtr.evals._models import Model
from fxtr.evals._scorers import JUDGES, Score, Scorer
from fxtr.experiment._definition import _normalized_source_hash
from fxtr.experiment._encoding import encode_text
from fxtr.experiment._entity import Entity

if TYPE_CHECKING:
    from fxtr.agents._types import Trajectory
    from fxtr.experiment.steps import StepContext

AGENT_KINDS = ("state_matches", "tool_called", "scorer")


class TrajectoryScorer(Scorer):
    """A scorer that reads the whole trajectory, not only its answer.

    Build one with ``state_matches()``, ``tool_called()`` or ``scorer()``. The function it
    calls is named by its import path, and its code hash is a field, so editing it re-scores
    (through the conflict policy) and never serves a stale score.
    """

    function: str | None = None
    """``module:qualname`` of ``expected(case)`` (``state_matches``) or of the scoring
    function (``scorer``)."""
    code: str | None = None
    """Hash of that function's normalized source."""
    tool: str | None = None
    """The tool ``tool_called`` looks for."""
    arguments: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Arguments the call must have (``tool_called``); others may be there too."""

    def __post_init__(self) -> None:
        if self.kind not in AGENT_KINDS:
            msg = f"Unknown trajectory scorer kind {self.kind!r}: use one of {AGENT_KINDS}."
            raise ValueError(msg)

    def __fxtr_id__(self) -> str:
        """The scorer's kind (and its function or tool) in pytest node ids."""
        detail = self.tool or (self.function or "").rpartition(":")[2]
        return f"{self.kind}[{detail}]"

    def grade_trajectory(self, case: Case, trajectory: Trajectory) -> Score:
        """Grade a trajectory (no model is called).

        Raises:
            TypeError: the function returned something that is not a Score or a number.
        """
        if self.kind == "tool_called":
            return _tool_called(self, trajectory)
        assert self.function is not None
        fn = import_path(self.function, "scoring function")
        if self.kind == "state_matches":
            return _state_matches(fn(case), trajectory)
        value = fn(case, trajectory) if self.judge is None else fn(case, trajectory, self.judge)
        if inspect.isawaitable(value):
            value.close()  # type: ignore[attr-defined]
            msg = f"The scorer {self.function!r} is async: grade it with the score step."
            raise TypeError(msg)
        return self.as_score(value, trajectory)

    def as_score(self, value: Any, trajectory: Trajectory) -> Score:
        """What a scoring function returned, as a Score.

        Raises:
            TypeError: neither a Score nor a number.
        """
        if isinstance(value, Score):
            return value
        if isinstance(value, (bool, int, float)):
            return Score(value=float(value), answer=trajectory.answer)
        msg = (
            f"The scorer {self.function!r} returned {type(value).__name__} {value!r:.60}: "
            "return a fxtr.evals.Score or a number."
        )
        raise TypeError(msg)


def state_matches(expected: Callable[[Case], Any]) -> TrajectoryScorer:
    """1.0 when the final environment equals ``expected(case)``.

    The explanation lists the fields that differ (``accounts.A1.balance: 80 != 100``, the
    final value first), so a failed case says what the agent got wrong.

    Args:
        expected: an importable function of the case returning the environment the
            agent should leave (an Entity or JSON-like value, like ``Agent(env=...)``).
    """
    return TrajectoryScorer(
        kind="state_matches",
        function=path_of(expected, "expected-state function"),
        code=_normalized_source_hash(expected),
    )


def tool_called(name: str, /, **arguments: Any) -> TrajectoryScorer:
    """1.0 when the agent called tool ``name`` with at least these arguments."""
    json.dumps(arguments)  # arguments are compared as JSON: fail early on anything else
    return TrajectoryScorer(kind="tool_called", tool=name, arguments=dict(arguments))


def scorer(fn: Callable[..., Any], *, judge: Model | None = None) -> TrajectoryScorer:
    """Score trajectories with any importable ``(case, trajectory) -> Score | float``.

    The function may be async. With ``judge``, it is called as ``fn(case, trajectory,
    judge)``: the judge is part of the scorer (changing it re-scores), and the function asks
    it through fxtr within the score step, which caches the grade.
    """
    wanted = 2 if judge is None else 3
    if len(inspect.signature(fn).parameters) != wanted:
        args = "(case, trajectory)" if judge is None else "(case, trajectory, judge)"
        msg = f"scorer({fn.__qualname__}) takes a function of {args}."
        raise TypeError(msg)
    return TrajectoryScorer(
        kind="scorer",
        function=path_of(fn, "scoring function"),
        code=_normalized_source_hash(fn),
        judge=judge,
    )


def _tool_called(s: TrajectoryScorer, trajectory: Trajectory) -> Score:
    made = trajectory.calls
    for c in made:
        if c.name == s.tool and all(
            k in c.arguments and c.arguments[k] == v for k, v in s.arguments.items()
        ):
            return Score(value=1.0, answer=f"{c.name}({json.dumps(c.arguments)})")
    listed = "; ".join(f"{c.name}({json.dumps(c.arguments)})" for c in made) or "no tool calls"
    return Score(
        value=0.0,
        explanation=f"no call of {s.tool}({json.dumps(s.arguments)}); the calls: {listed}",
    )


def tree(value: Any) -> Any:
    """A value as plain JSON (entities as their fields), for comparing and showing."""
    if isinstance(value, Entity):
        return {f: tree(getattr(value, f)) for f in value.__entity_fields__}
    if isinstance(value, dict):
        return {str(k): tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [tree(v) for v in value]
    return value


def differences(actual: Any, expected: Any, path: str = "") -> list[str]:
    """Where two environments differ: ``path: actual != expected`` per differing field."""
    if isinstance(actual, dict) and isinstance(expected, dict):
        out: list[str] = []
        for key in [*expected, *(k for k in actual if k not in expected)]:
            sub = f"{path}.{key}" if path else str(key)
            if key not in actual:
                out.append(f"{sub}: missing (expected {json.dumps(expected[key])})")
            elif key not in expected:
                out.append(f"{sub}: {json.dumps(actual[key])} (not expected)")
            else:
                out.extend(differences(actual[key], expected[key], sub))
        return out
    if isinstance(actual, list) and isinstance(expected, list) and len(actual) == len(expected):
        return [
            d
            for k, (a, e) in enumerate(zip(actual, expected, strict=True))
            for d in differences(a, e, f"{path}[{k}]")
        ]
    numbers = all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in (actual, expected)
    )
    if actual == expected and (numbers or type(actual) is type(expected)):
        return []
    return [f"{path or '(the environment)'}: {json.dumps(actual)} != {json.dumps(expected)}"]


def _state_matches(expected: Any, trajectory: Trajectory) -> Score:
    encode_text(expected)  # an expected state must be a storable value, as the env is
    found = differences(tree(trajectory.env), tree(expected))
    if not found:
        return Score(value=1.0, answer=trajectory.answer, explanation="the environment matches")
    return Score(
        value=0.0,
        answer=trajectory.answer,
        explanation=f"{len(found)} field(s) differ (final != expected): " + "; ".join(found),
    )


async def grade_trajectory(
    context: StepContext, scorer: Scorer, case: Case, trajectory: Trajectory
) -> Score:
    """Grade a trajectory: text scorers and judges grade its answer."""
    if scorer.kind == "sandbox_check":  # its final tree
        from fxtr.agents._types import sandbox_name

        grade_tree = sandbox_name("grade_trajectory")
        score: Score = await grade_tree(context, scorer, case, trajectory)
        return score
    from fxtr.agents._env import whole

    trajectory = await whole(context, trajectory)  # a stored environment, read whole
    if isinstance(scorer, TrajectoryScorer):
        if scorer.kind == "scorer":  # maybe async, maybe asking a judge
            assert scorer.function is not None
            fn = import_path(scorer.function, "scoring function")
            judged = () if scorer.judge is None else (scorer.judge,)
            value = fn(case, trajectory, *judged)
            if inspect.isawaitable(value):
                value = await value
            return scorer.as_score(value, trajectory)
        return scorer.grade_trajectory(case, trajectory)
    if scorer.kind in JUDGES:
        from fxtr.evals._evaluate import _judged

        return await _judged(context, scorer, case, trajectory.text)
    return scorer.grade(case, trajectory.text)
