"""Two agent evals whose stores fxtr wrote before environments were trees of parts.

``tests/data/migration/write_agents.py`` ran them with fxtr at 8b4fef9 (environments stored
whole in every tool call's result); ``tests/test_env_tree.py`` checks that the store it
wrote still serves them. Keep this module as it is: its tools' and environment's code is
part of the cached entries' fingerprints.
"""

from __future__ import annotations

from typing import Any

from fxtr.agents import Agent, state_matches, tool, tool_call
from fxtr.evals import Case, includes, register_mock, user_text
from fxtr.experiment.arrays import Array
from fxtr.models import ModelRequest, ToolMessage

RAN: list[str] = []
"""Tool calls run in this process (a cached run runs none)."""


def bookings(case: Case) -> dict[str, Any]:
    """A small reservation database."""
    return {
        "reservations": {
            r: {"status": "confirmed", "seat": f"{n}A"} for n, r in enumerate(("R1", "R2", "R3"))
        },
        "log": [],
    }


def bookings_after(case: Case) -> dict[str, Any]:
    """The database once the case's reservation is cancelled."""
    db = bookings(case)
    db["reservations"][case.input]["status"] = "cancelled"
    db["log"].append(f"cancel {case.input}")
    return db


@tool
def cancel(reservation_id: str, env: dict[str, Any]) -> str:
    """Cancel a reservation.

    Args:
        reservation_id: the reservation.
    """
    RAN.append(f"cancel {reservation_id}")
    env["reservations"][reservation_id]["status"] = "cancelled"
    env["log"].append(f"cancel {reservation_id}")
    return "cancelled"


@tool
def plus(a: int, b: int) -> int:
    """Add two whole numbers.

    Args:
        a: one.
        b: the other.
    """
    RAN.append(f"plus {a} {b}")
    return a + b


def clerk(request: ModelRequest) -> object:
    """Cancel the reservation the user names, then say so."""
    if isinstance(request.context[-1], ToolMessage):
        return "Done: " + str(request.context[-1].results[0].content)
    return tool_call("cancel", reservation_id=user_text(request))


def adder(request: ModelRequest) -> object:
    """Add 'A+B' with the tool, then answer."""
    if isinstance(request.context[-1], ToolMessage):
        return str(request.context[-1].results[0].content)
    a, b = user_text(request).split("+")
    return tool_call("plus", a=int(a), b=int(b))


CLERK = register_mock("migration-clerk", clerk)
ADDER = register_mock("migration-adder", adder)


def env_inputs() -> dict[str, Any]:
    """The eval with an environment: one cancellation per case, scored on the final state."""
    cases = [Case(id=r, input=r) for r in ("R1", "R3")]
    return {
        "model": Array.from_mapping({"clerk": CLERK}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": state_matches(bookings_after),
        "samples": 1,
        "agent": Agent(tools=(cancel,), env=bookings, max_turns=4),
    }


def plain_inputs() -> dict[str, Any]:
    """The eval without an environment."""
    cases = [Case(id="c1", input="2+3", target="5")]
    return {
        "model": Array.from_mapping({"adder": ADDER}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": includes(),
        "samples": 1,
        "agent": Agent(tools=(plus,), max_turns=4),
    }
