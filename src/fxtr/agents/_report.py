"""What the summary and the viewer say of an agent eval's trajectories, read from the record."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from fxtr.agents._types import STOPS, Trajectory
from fxtr.experiment._encoding import decode_text
from fxtr.experiment._entity import BoundID

TRAJECTORY_STEP = "fxtr.agents.trajectory"
"""The step whose result is a finished trajectory."""


def load_trajectory(store: Any, result_text: str | None) -> Trajectory | None:
    """The trajectory a ``fxtr.agents.trajectory`` invocation recorded (``None`` if unreadable)."""
    if not result_text:
        return None
    try:
        value = decode_text(result_text)
        if isinstance(value, BoundID):
            text = store.get_entity(value.id)
            value = decode_text(text) if text else None
    except (LookupError, TypeError, ValueError):
        return None  # a damaged or foreign entry says nothing, rather than something wrong
    return value if isinstance(value, Trajectory) else None


def trajectory_model(address: str) -> str:
    """The ``model`` key of the agent workflow a trajectory step belongs to."""
    from fxtr.tracing._jobgraph import address_segments, split_segment

    for segment in reversed(address_segments(address)):
        keys = split_segment(segment)[1]
        if "model" in keys:
            return keys["model"]
    return "?"


def agent_rows(store: Any, invocations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model: trajectories, mean turns and tool calls, tool errors, stops by kind.

    Empty when the job ran no agent.
    """
    by_model: dict[str, list[Trajectory]] = defaultdict(list)
    for inv in invocations:
        if inv.get("step") != TRAJECTORY_STEP or inv.get("status") != "succeeded":
            continue
        trajectory = load_trajectory(store, inv.get("result_text"))
        if trajectory is not None:
            by_model[trajectory_model(inv["address"])].append(trajectory)
    rows = []
    for model, found in sorted(by_model.items()):
        n = len(found)
        stops = Counter(t.stop for t in found)
        rows.append(
            {
                "model": model,
                "trajectories": n,
                "mean_turns": sum(t.turns for t in found) / n,
                "mean_tool_calls": sum(t.tool_calls for t in found) / n,
                "tool_errors": sum(t.tool_errors for t in found),
                "stops": {k: stops[k] for k in (*STOPS, *sorted(stops)) if stops.get(k)},
            }
        )
    return rows


def stops_text(stops: dict[str, int]) -> str:
    """``answer 8, limit:turns 2``."""
    return ", ".join(f"{kind} {count}" for kind, count in stops.items())
