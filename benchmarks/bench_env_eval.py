"""The agent eval ``bench_env`` runs end to end: cancellations on a τ²-airline-like database."""

from __future__ import annotations

import functools
import json
from typing import Any

from fxtr.agents import Agent, state_matches, tool, tool_call
from fxtr.evals import Case, register_mock, user_text
from fxtr.experiment.arrays import Array
from fxtr.models import ModelRequest, ToolMessage


@functools.cache
def _db_text() -> str:
    from benchmarks.bench_env import airline

    return json.dumps(airline())


def airline_env(case: Case) -> dict[str, Any]:
    """A fresh copy of the database (the same for every case)."""
    return json.loads(_db_text())  # type: ignore[no-any-return]


def _targets(n: int) -> list[str]:
    return sorted(json.loads(_db_text())["reservations"])[:n]


def expected(case: Case) -> dict[str, Any]:
    """The database after the case's cancellations."""
    from benchmarks.bench_env import cancel

    db = airline_env(case)
    for rid in _targets(int(case.input)):
        cancel(db, rid)
    return db


@tool
def cancel_reservation(reservation_id: str, env: dict[str, Any]) -> str:
    """Cancel a reservation.

    Args:
        reservation_id: the reservation to cancel.
    """
    from benchmarks.bench_env import cancel

    cancel(env, reservation_id)
    return "cancelled"


def clerk(request: ModelRequest) -> object:
    """Cancel the first N reservations, one a turn, then say done."""
    done = sum(isinstance(m, ToolMessage) for m in request.context)
    wanted = _targets(int(user_text(request)))
    if done < len(wanted):
        return tool_call("cancel_reservation", reservation_id=wanted[done])
    return "done"


CLERK = register_mock("bench-env-clerk", clerk)


def inputs(calls: int) -> dict[str, Any]:
    """One trajectory of ``calls`` cancellations, scored against the expected database."""
    case = Case(id=f"n{calls}", input=str(calls))
    return {
        "model": Array.from_mapping({"clerk": CLERK}, dims=["model"]),
        "case": Array.from_mapping({case.id: case}, dims=["case"]),
        "scorer": state_matches(expected),
        "samples": 1,
        "agent": Agent(tools=(cancel_reservation,), env=airline_env, max_turns=calls + 2),
    }
